"""SamplingParams: vLLM's name and fields for how a request samples.

A field left None takes the engine's default, as a request to `drift serve` that omits it does:
the model's recommended sampling (its GGUF's general.sampling.* keys), else llama.cpp's
defaults. Set temperature=0 for greedy decoding. Values are checked when the object is made,
by the engine's own check (ValueError naming the field).
"""

from . import _drift

_ENGINE_FIELDS = ("temperature", "top_p", "top_k", "min_p", "presence_penalty",
                  "frequency_penalty", "repetition_penalty", "seed", "stop", "stop_token_ids",
                  "ignore_eos", "logit_bias")


class SamplingParams:
    def __init__(self, n: int = 1, *, temperature: float | None = None,
                 top_p: float | None = None, top_k: int | None = None,
                 min_p: float | None = None, presence_penalty: float | None = None,
                 frequency_penalty: float | None = None,
                 repetition_penalty: float | None = None, seed: int | None = None,
                 stop: str | list[str] | None = None,
                 stop_token_ids: list[int] | None = None, ignore_eos: bool = False,
                 max_tokens: int | None = 16, logit_bias: dict[int, float] | None = None):
        # max_tokens: 16 as in vLLM; None runs until a stop or the end of the context.
        # top_k: 0 or -1 (vLLM's "off") keeps every token. seed: with n > 1, sequence i uses
        # seed + i, so the sequences differ and each is reproducible. stop: strings that end the
        # text before them (the engine cuts it; finish_reason "stop", stop_reason the string).
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= _drift.MAX_CHOICES:
            raise ValueError(f"n must be an int in [1, {_drift.MAX_CHOICES}], got {n!r}")
        if max_tokens is not None and (isinstance(max_tokens, bool)
                                       or not isinstance(max_tokens, int) or max_tokens < 1):
            raise ValueError(f"max_tokens must be an int >= 1 or None, got {max_tokens!r}")
        self.n = n
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.min_p = min_p
        self.presence_penalty = presence_penalty
        self.frequency_penalty = frequency_penalty
        self.repetition_penalty = repetition_penalty
        self.seed = seed
        self.stop = [stop] if isinstance(stop, str) else (list(stop) if stop is not None else None)
        self.stop_token_ids = list(stop_token_ids) if stop_token_ids is not None else None
        self.ignore_eos = ignore_eos
        self.logit_bias = dict(logit_bias) if logit_bias is not None else None
        _drift.check_sampling(self._engine_fields())

    def _engine_fields(self) -> dict:
        """The fields set, as the engine takes them."""
        fields = {name: getattr(self, name) for name in _ENGINE_FIELDS
                  if getattr(self, name) is not None}
        if fields.get("ignore_eos") is False:
            del fields["ignore_eos"]
        return fields

    def _job(self, kind: str, prompt) -> tuple:
        """The engine job of one prompt; the engine makes its n sequences (seed, seed + 1, ...)."""
        return (kind, prompt, self.max_tokens, self._engine_fields(), self.n)

    def __repr__(self) -> str:
        set_fields = ", ".join(f"{name}={getattr(self, name)!r}"
                               for name in ("n", "max_tokens") + _ENGINE_FIELDS
                               if getattr(self, name) not in (None, False))
        return f"SamplingParams({set_fields})"
