"""LLM: offline generation in vLLM's shape, on one drift engine in this process."""

import itertools
import os
from pathlib import Path

from . import _drift
from .models import resolve_model
from .outputs import CompletionOutput, RequestOutput
from .prompts import conversation_list, prompt_job, prompt_list
from .sampling_params import SamplingParams


def load_engine(model, chat_template, engine_options: dict) -> "_drift.Engine":
    """The engine for `model` (a path, a registry name, None for the default) with the CLI's
    engine options as keywords (threads=..., parallel=..., kv_mib=..., no_prefix_cache=True, ...;
    _drift.engine_option_defaults() gives what each left out gets)
    and `chat_template` a Jinja template file replacing the model's."""
    template = Path(chat_template).read_text() if chat_template is not None else None
    return _drift.Engine(resolve_model(model), engine_options, template)


def params_list(sampling_params, count: int) -> list[SamplingParams]:
    """None, one SamplingParams for every prompt, or one per prompt."""
    if sampling_params is None:
        return [SamplingParams()] * count
    if isinstance(sampling_params, SamplingParams):
        return [sampling_params] * count
    params = list(sampling_params)
    if len(params) != count:
        raise ValueError(f"{len(params)} sampling_params for {count} prompts")
    return params


def stop_reason(params: SamplingParams, finish_reason: str, token_ids: list[int],
                stop_string: str | None = None):
    """vLLM's stop_reason: the stop string or the stop_token_ids entry that ended the sequence."""
    if stop_string is not None:
        return stop_string
    if finish_reason == "stop" and token_ids and params.stop_token_ids:
        if token_ids[-1] in params.stop_token_ids:
            return token_ids[-1]
    return None


class LLM:
    def __init__(self, model: str | os.PathLike | None = None, *,
                 chat_template: str | os.PathLike | None = None, **engine_options):
        self._engine = load_engine(model, chat_template, engine_options)
        self._request_ids = itertools.count()

    def generate(self, prompts, sampling_params=None) -> list[RequestOutput]:
        """One RequestOutput per prompt, in order. Every prompt (and each of its n sequences)
        is submitted at once, so the engine runs them batched."""
        prompts = prompt_list(prompts)
        jobs = [prompt_job(p) for p in prompts]
        return self._run(jobs, params_list(sampling_params, len(prompts)))

    def chat(self, messages, sampling_params=None) -> list[RequestOutput]:
        """One conversation ([{"role": ..., "content": ...}, ...]) or a list of them, each
        rendered with the model's chat template (as `drift chat` and /v1/chat/completions do)
        and continued by the assistant. RequestOutput.prompt is the rendered prompt."""
        conversations = conversation_list(messages)
        jobs = [("chat", conversation, None) for conversation in conversations]
        return self._run(jobs, params_list(sampling_params, len(conversations)))

    def stats(self) -> dict:
        """The engine's counters and gauges: num_running, num_waiting, kv_pages_*,
        prefix_cache_*, finished requests by reason, ..."""
        return self._engine.stats()

    def shutdown(self) -> None:
        """Stops the engine now (later calls raise EngineError); garbage collection does it too."""
        self._engine.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    def _run(self, jobs, params: list[SamplingParams]) -> list[RequestOutput]:
        engine_jobs = [p._job(kind, value) for (kind, value, _), p in zip(jobs, params)]
        results = iter(self._engine.generate(engine_jobs))
        outputs = []
        for (kind, value, text), p in zip(jobs, params):
            choices = []
            prompt_ids = None
            for index in range(p.n):
                prompt_ids, token_ids, generated, finish_reason, stop_string = next(results)
                choices.append(CompletionOutput(
                    index=index, text=generated, token_ids=token_ids,
                    finish_reason=finish_reason,
                    stop_reason=stop_reason(p, finish_reason, token_ids, stop_string)))
            if kind == "chat":
                text = self._engine.detokenize(prompt_ids, render_special=True)
            outputs.append(RequestOutput(request_id=str(next(self._request_ids)), prompt=text,
                                         prompt_token_ids=prompt_ids, outputs=choices))
        return outputs
