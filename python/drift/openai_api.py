"""The OpenAI completions and chat routes over drift.AsyncLLM, for servers written in Python
(drift.ray): request bodies to prompts and SamplingParams, engine outputs to the OpenAI JSON and
server-sent event chunks that `drift serve` answers with.

    api = OpenAIRoutes(drift.AsyncLLM(...), model_name="smollm2")
    request = parse_request(body, chat=False)     # raises RequestError(400, message, param)
    async for chunk in api.stream(request): ...   # "data: {...}\\n\\n" lines, then "data: [DONE]"
    response = await api.complete(request)        # the whole JSON object

The engine decides what is valid (sampling ranges, prompt and context limits): its ValueError
becomes a 400 and its EngineError a 503 (overloaded, shutting down) or 500, as in `drift serve`.
"""

import json
import time
import uuid
from dataclasses import dataclass

from . import _drift
from .sampling_params import SamplingParams

# OpenAI's and vLLM's sampling fields that SamplingParams takes under the same name.
_SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "min_p", "presence_penalty",
                    "frequency_penalty", "repetition_penalty", "seed", "ignore_eos")


class RequestError(Exception):
    """A request the server refuses, with its HTTP status and the field at fault."""

    def __init__(self, status: int, message: str, param: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param

    def body(self) -> dict:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": self.message, "type": kind, "param": self.param,
                          "code": self.status}}


@dataclass
class ParsedRequest:
    chat: bool
    model: str | None
    prompt: str | None = None             # completions
    messages: list[dict] | None = None    # chat
    params: SamplingParams = None
    stream: bool = False
    include_usage: bool = False           # stream_options.include_usage

    def prefix_text(self) -> str:
        """The text a prompt starts with, for routing requests that share one (drift.ray)."""
        if not self.chat:
            return self.prompt
        return "".join(f"<|{m.get('role')}|>{m.get('content')}" for m in self.messages)


def _type_error(name: str, expected: str, value) -> RequestError:
    return RequestError(400, f"{name}: expected {expected}, got {type(value).__name__}", name)


def _int_field(body: dict, name: str, low: int, high: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(name, "an integer", value)
    if not low <= value <= high:
        raise RequestError(400, f"{name}: must be in [{low}, {high}], got {value}", name)
    return value


def parse_request(body, chat: bool) -> ParsedRequest:
    """An OpenAI request body -> ParsedRequest; RequestError(400) naming the field otherwise."""
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise _type_error("model", "a string", model)
    request = ParsedRequest(chat=chat, model=model)
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError(400, "messages: expected a non-empty list of messages", "messages")
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str) or \
                    not isinstance(m.get("content"), str):
                raise RequestError(400, f"messages[{i}]: expected {{\"role\": str, \"content\": "
                                        "str}", "messages")
        request.messages = [{"role": m["role"], "content": m["content"]} for m in messages]
    else:
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise _type_error("prompt", "a string", prompt)
        request.prompt = prompt
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _type_error("stream", "a boolean", stream)
    request.stream = stream
    options = body.get("stream_options")
    if options is not None:
        if not isinstance(options, dict):
            raise _type_error("stream_options", "an object", options)
        request.include_usage = bool(options.get("include_usage", False))
    fields = {}
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None:  # the engine judges the strings (SamplingParams' check)
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise _type_error("stop", "a string or a list of strings", stop)
        fields["stop"] = stop
    max_tokens = _int_field(body, "max_completion_tokens" if chat else "max_tokens", 1, 1 << 24)
    if max_tokens is None and chat:
        max_tokens = _int_field(body, "max_tokens", 1, 1 << 24)
    n = _int_field(body, "n", 1, _drift.MAX_CHOICES) or 1
    for name in _SAMPLING_FIELDS:
        value = body.get(name)
        if value is None:
            continue
        if name == "ignore_eos" and not isinstance(value, bool):
            raise _type_error(name, "a boolean", value)
        if name in ("top_k", "seed") and (isinstance(value, bool) or not isinstance(value, int)):
            raise _type_error(name, "an integer", value)
        if name not in ("top_k", "seed", "ignore_eos") and \
                (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise _type_error(name, "a number", value)
        fields[name] = value
    try:
        # max_tokens absent: vLLM's default for completions (16); chat runs to a stop.
        request.params = SamplingParams(
            n=n, max_tokens=max_tokens if max_tokens is not None else (None if chat else 16),
            **fields)
    except ValueError as e:
        raise RequestError(400, str(e), _field_named_in(str(e))) from None
    return request


def _field_named_in(message: str) -> str | None:
    head = message.split(":", 1)[0].split(" ", 1)[0]
    return head if head in _SAMPLING_FIELDS or head in ("n", "max_tokens", "stop") else None


def _finish_reason(reason: str | None) -> str | None:
    # The engine's "abort" (cancelled) has no OpenAI name; vLLM reports it as "abort" too.
    return reason


class OpenAIRoutes:
    def __init__(self, engine, model_name: str):
        self._engine = engine
        self.model_name = model_name

    def check_model(self, request: ParsedRequest) -> None:
        if request.model is not None and request.model != self.model_name:
            raise RequestError(404, f"model '{request.model}' is not served here (this server "
                                    f"serves '{self.model_name}')", "model")

    def _outputs(self, request: ParsedRequest):
        rid = uuid.uuid4().hex
        if request.chat:
            return self._engine.chat(request.messages, request.params, rid)
        return self._engine.generate(request.prompt, request.params, rid)

    async def _run(self, request: ParsedRequest):
        """Yields (choice index, text delta, finish reason or None, the RequestOutput); the
        engine has cut the text at the stop strings and ended those sequences "stop"."""
        self.check_model(request)
        n = request.params.n
        seen, done = [0] * n, [False] * n
        try:
            async for out in self._outputs(request):
                for c in out.outputs:
                    if done[c.index]:
                        continue
                    delta = c.text[seen[c.index]:]
                    seen[c.index] = len(c.text)
                    if c.finish_reason is not None:
                        done[c.index] = True
                        yield c.index, delta, _finish_reason(c.finish_reason), out
                    elif delta:
                        yield c.index, delta, None, out
        except ValueError as e:
            raise RequestError(400, str(e)) from None
        except _drift.EngineError as e:
            status = 503 if "overloaded" in str(e) or "shutting down" in str(e) else 500
            raise RequestError(status, str(e)) from None

    def _usage(self, out, completion_tokens: int) -> dict:
        prompt = len(out.prompt_token_ids)
        return {"prompt_tokens": prompt, "completion_tokens": completion_tokens,
                "total_tokens": prompt + completion_tokens}

    async def complete(self, request: ParsedRequest) -> dict:
        n = request.params.n
        texts, reasons = [""] * n, [None] * n
        last = None
        async for index, delta, reason, out in self._run(request):
            texts[index] += delta
            if reason is not None:
                reasons[index] = reason
            last = out
        completion_tokens = sum(len(c.token_ids) for c in last.outputs)
        created = int(time.time())
        if request.chat:
            choices = [{"index": i, "message": {"role": "assistant", "content": texts[i]},
                        "finish_reason": reasons[i], "logprobs": None} for i in range(n)]
            kind, prefix = "chat.completion", "chatcmpl-"
        else:
            choices = [{"index": i, "text": texts[i], "finish_reason": reasons[i],
                        "logprobs": None} for i in range(n)]
            kind, prefix = "text_completion", "cmpl-"
        return {"id": prefix + uuid.uuid4().hex, "object": kind, "created": created,
                "model": self.model_name, "choices": choices,
                "usage": self._usage(last, completion_tokens)}

    async def stream(self, request: ParsedRequest):
        """Server-sent events: one chunk per text delta, a chunk with the finish reason, the usage
        chunk when asked, then [DONE]. An error before the first chunk raises RequestError; one
        after it is sent as an error event (the status is gone by then)."""
        rid = ("chatcmpl-" if request.chat else "cmpl-") + uuid.uuid4().hex
        kind = "chat.completion.chunk" if request.chat else "text_completion"
        created = int(time.time())

        def chunk(choices, usage=None):
            body = {"id": rid, "object": kind, "created": created, "model": self.model_name,
                    "choices": choices}
            if usage is not None:
                body["usage"] = usage
            return f"data: {json.dumps(body)}\n\n"

        def choice(index, delta, reason):
            if request.chat:
                return {"index": index, "delta": delta, "finish_reason": reason,
                        "logprobs": None}
            return {"index": index, "text": delta.get("content", ""), "finish_reason": reason,
                    "logprobs": None}

        runs = self._run(request)
        try:
            first = await runs.__anext__()
        except StopAsyncIteration:
            first = None
        started = [False] * request.params.n
        last = None

        def events(item):
            index, delta, reason, out = item
            parts = []
            if request.chat and not started[index]:
                started[index] = True
                parts.append(chunk([choice(index, {"role": "assistant", "content": ""}, None)]))
            if delta:
                parts.append(chunk([choice(index, {"content": delta}, None)]))
            if reason is not None:
                parts.append(chunk([choice(index, {}, reason)]))
            return parts, out

        if first is not None:
            parts, last = events(first)
            for p in parts:
                yield p
            try:
                async for item in runs:
                    parts, last = events(item)
                    for p in parts:
                        yield p
            except RequestError as e:
                yield f"data: {json.dumps(e.body())}\n\n"
                return
        if request.include_usage and last is not None:
            yield chunk([], self._usage(last, sum(len(c.token_ids) for c in last.outputs)))
        yield "data: [DONE]\n\n"
