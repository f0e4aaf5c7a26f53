"""What a request produced, with vLLM's class and field names."""

from dataclasses import dataclass, field


@dataclass
class CompletionOutput:
    """One generated sequence of a request (there are SamplingParams.n of them)."""

    index: int
    text: str
    token_ids: list[int]
    # "stop" (an end-of-sequence or stop token), "length" (max_tokens), "abort" (cancelled), or
    # None while a stream is still running.
    finish_reason: str | None = None
    # The id of the stop_token_ids entry that ended the sequence; None for the model's own
    # end-of-sequence tokens and for other finishes (vLLM's meaning).
    stop_reason: int | None = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    """A request's prompt and its outputs; streams yield one after each token, cumulative."""

    request_id: str
    # The prompt as given, or a conversation as the chat template rendered it.
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)
    finished: bool = True
