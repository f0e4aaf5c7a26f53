"""AsyncLLM: streams equal batch output, are cumulative, and are cancelled when dropped."""
import asyncio
import gc
import time

import pytest

import drift
from test_generate import PROMPTS

GREEDY = drift.SamplingParams(temperature=0, max_tokens=16)


async def collect(engine, prompt, params, request_id):
    outs = [out async for out in engine.generate(prompt, params, request_id)]
    return outs


def test_async_streams_equal_the_batch_output(llm, async_llm):
    prompts = PROMPTS[:8]
    batch = llm.generate(prompts, GREEDY)

    async def run_all():
        return await asyncio.gather(*(collect(async_llm, p, GREEDY, f"r{i}")
                                      for i, p in enumerate(prompts)))

    streams = asyncio.run(run_all())
    for i, (outs, expected) in enumerate(zip(streams, batch)):
        final = outs[-1]
        assert final.finished and not any(o.finished for o in outs[:-1])
        assert final.request_id == f"r{i}"
        assert final.prompt_token_ids == expected.prompt_token_ids
        assert final.outputs[0].token_ids == expected.outputs[0].token_ids
        assert final.outputs[0].text == expected.outputs[0].text
        assert final.outputs[0].finish_reason == expected.outputs[0].finish_reason
        # Cumulative: one output per token, each extending the one before.
        assert len(outs) == len(final.outputs[0].token_ids)
        for before, after in zip(outs, outs[1:]):
            assert after.outputs[0].text.startswith(before.outputs[0].text)
            assert after.outputs[0].token_ids[:-1] == before.outputs[0].token_ids


def wait_idle(engine, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        stats = engine.stats()
        if stats["num_running"] == 0 and stats["num_waiting"] == 0:
            return stats
        time.sleep(0.02)
    return engine.stats()


def test_dropping_the_iterator_cancels_the_request(async_llm):
    long = drift.SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)
    before = async_llm.stats()
    cancelled_before = before["finished"]["cancelled"]

    async def read_three_then_drop():
        stream = async_llm.generate("Count to a thousand:", long, "dropped")
        seen = 0
        async for out in stream:
            seen = len(out.outputs[0].token_ids)
            if seen >= 3:
                break
        assert async_llm.stats()["num_running"] == 1
        del stream  # asyncio closes the dropped generator, which cancels the request
        gc.collect()
        for _ in range(100):
            await asyncio.sleep(0.02)
            if async_llm.stats()["num_running"] == 0:
                break
        return seen

    assert asyncio.run(read_three_then_drop()) == 3
    stats = wait_idle(async_llm)
    assert stats["num_running"] == 0 and stats["num_waiting"] == 0
    assert stats["finished"]["cancelled"] == cancelled_before + 1
    assert stats["kv_pages_used"] == 0  # its pages are free (or kept only as prefix cache)
    # It stopped soon after the third token, far from its 400.
    assert stats["generation_tokens_total"] - before["generation_tokens_total"] < 100


def test_a_task_cancelled_mid_stream_cancels_the_request(async_llm):
    long = drift.SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)
    cancelled_before = async_llm.stats()["finished"]["cancelled"]

    async def consume():
        async for _ in async_llm.generate("Tell me a long story.", long):
            pass

    async def run():
        task = asyncio.create_task(consume())
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    stats = wait_idle(async_llm)
    assert stats["num_running"] == 0
    assert stats["finished"]["cancelled"] == cancelled_before + 1


def test_stream_errors_raise_at_the_first_iteration(async_llm):
    async def bad():
        async for _ in async_llm.generate({"prompt_token_ids": [10**8]}):
            pass

    with pytest.raises(ValueError, match="outside the vocabulary"):
        asyncio.run(bad())
    # The engine still serves.
    outs = asyncio.run(collect(async_llm, "Hi", drift.SamplingParams(temperature=0, max_tokens=3),
                               None))
    assert outs[-1].finished and len(outs[-1].outputs[0].token_ids) <= 3
