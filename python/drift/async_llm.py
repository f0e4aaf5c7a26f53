"""AsyncLLM: streaming generation for asyncio programs, in vLLM's shape.

    engine = drift.AsyncLLM()
    async for out in engine.generate("Hello", drift.SamplingParams(max_tokens=32), "req-1"):
        print(out.outputs[0].text)       # cumulative; out.finished on the last one

The engine's worker hands each token to a queue and signals an eventfd that the event loop
watches, so it never waits for the GIL. Leaving the loop early (break, an exception, the
generator being dropped) cancels the request: the engine frees its KV pages at its next step.
"""

import asyncio
import itertools
import os
from dataclasses import replace

from . import _drift
from .llm import load_engine, stop_reason
from .outputs import CompletionOutput, RequestOutput
from .prompts import prompt_job
from .sampling_params import SamplingParams


class AsyncLLM:
    def __init__(self, model: str | os.PathLike | None = None, *,
                 chat_template: str | os.PathLike | None = None, **engine_options):
        self._engine = load_engine(model, chat_template, engine_options)
        self._channel = _drift.StreamChannel.open()
        self._keys = itertools.count()
        self._request_ids = itertools.count()
        self._routes: dict[int, tuple[asyncio.Queue, int]] = {}  # key -> (queue, sequence index)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def generate(self, prompt, sampling_params: SamplingParams | None = None,
                       request_id: str | None = None):
        """Yields a RequestOutput after every token of the prompt's sequences, each with the
        text and token ids so far; the last has finished=True. Raises ValueError (bad request)
        or EngineError (overloaded, shutting down, failed) at the first iteration."""
        kind, value, text = prompt_job(prompt)
        async for out in self._stream(kind, value, text, sampling_params, request_id):
            yield out

    async def chat(self, messages: list[dict], sampling_params: SamplingParams | None = None,
                   request_id: str | None = None):
        """As generate, for one conversation rendered with the model's chat template."""
        async for out in self._stream("chat", list(messages), None, sampling_params, request_id):
            yield out

    def stats(self) -> dict:
        """The engine's counters and gauges, as LLM.stats()."""
        return self._engine.stats()

    def shutdown(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._channel.fileno())
        self._loop = None
        self._engine.shutdown()

    def _attach(self) -> None:
        """Watches the channel from the running loop (moving it from a previous loop)."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._channel.fileno())
        loop.add_reader(self._channel.fileno(), self._deliver)
        self._loop = loop

    def _deliver(self) -> None:
        for key, token, delta, finish in self._channel.drain():
            route = self._routes.get(key)
            if route is not None:  # else its stream was closed: the event is dropped
                queue, index = route
                queue.put_nowait((index, token, delta, finish))

    async def _stream(self, kind, value, text, sampling_params, request_id):
        params = sampling_params if sampling_params is not None else SamplingParams()
        request_id = request_id if request_id is not None else str(next(self._request_ids))
        self._attach()
        prompt_ids = self._engine.tokenize(kind, value)
        if kind == "chat":
            text = self._engine.detokenize(prompt_ids, render_special=True)
        queue: asyncio.Queue = asyncio.Queue()
        keys = [next(self._keys) for _ in range(params.n)]
        handles = []
        try:
            for index, key in enumerate(keys):
                self._routes[key] = (queue, index)
            # The ids tokenize gave: a conversation is rendered once, not again at submit.
            handles = self._engine.submit_stream(params._job("tokens", prompt_ids), self._channel,
                                                 keys)
            choices = [CompletionOutput(index=i, text="", token_ids=[]) for i in range(params.n)]
            running = params.n
            while running:
                index, token, delta, finish = await queue.get()
                choice = choices[index]
                if token is not None:
                    choice.token_ids.append(token)
                choice.text += delta
                if finish is not None:
                    reason, error, message, _, _, stop_string = finish
                    if error == "value":
                        raise ValueError(message)
                    if error == "engine":
                        raise _drift.EngineError(message)
                    choice.finish_reason = reason
                    choice.stop_reason = stop_reason(params, reason, choice.token_ids,
                                                     stop_string)
                    running -= 1
                yield RequestOutput(
                    request_id=request_id, prompt=text, prompt_token_ids=prompt_ids,
                    outputs=[replace(c, token_ids=list(c.token_ids)) for c in choices],
                    finished=running == 0)
        finally:
            for handle in handles:
                handle.cancel()  # a no-op for a finished request
            for key in keys:
                self._routes.pop(key, None)
