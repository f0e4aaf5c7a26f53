"""KV-Compress over HTTP: the request field kv_keep (checked, 400 naming the field), the server
default --kv-keep, and compressed requests running side by side with the official openai client."""
import concurrent.futures

import pytest

from conftest import MODEL_NAME, Server, greedy

C = "/v1/completions"
# About 700 tokens: longer than kv_compress_min_tokens (256), so a compressed request is
# compressed between its prompt's chunks and while it decodes.
LONG = " ".join(f"Item {i}: the {['red', 'green', 'blue', 'grey'][i % 4]} box holds {i * 7 % 13} "
                f"stones." for i in range(70))


@pytest.mark.parametrize("value", [0, -0.5, 1.5, "half", True])
def test_kv_keep_out_of_range_is_a_400_naming_the_field(server, value):
    r = server.post(C, {"model": MODEL_NAME, "prompt": "Hello", "max_tokens": 2, "kv_keep": value})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == "kv_keep", r.text
    r = server.post(C, {"model": MODEL_NAME, "prompt": "Hello", "max_tokens": 2})
    assert r.status_code == 200, r.text


def test_kv_keep_one_is_the_uncompressed_output(client):
    plain = greedy(client, LONG, max_tokens=24, extra_body={"ignore_eos": True})
    keep_one = greedy(client, LONG, max_tokens=24, extra_body={"ignore_eos": True, "kv_keep": 1})
    assert keep_one.choices[0].text == plain.choices[0].text


def test_a_short_prompt_is_not_compressed(client):
    # 30 tokens in all stay below kv_compress_min_tokens: nothing is evicted, the text is the same.
    prompt = "The capital of France is"
    plain = greedy(client, prompt, max_tokens=24, extra_body={"ignore_eos": True})
    half = greedy(client, prompt, max_tokens=24, extra_body={"ignore_eos": True, "kv_keep": 0.5})
    assert half.choices[0].text == plain.choices[0].text


def test_compressed_requests_run_side_by_side(client):
    def one(i):
        return client.completions.create(
            model=MODEL_NAME, prompt=f"{i}. {LONG}", max_tokens=40, temperature=0,
            extra_body={"ignore_eos": True, "kv_keep": 0.5 if i % 2 else 0.25})

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        results = list(pool.map(one, range(6)))
    for r in results:
        assert r.choices[0].finish_reason == "length"
        assert r.usage.completion_tokens == 40
        assert r.usage.prompt_tokens > 256
        assert r.choices[0].text.strip()


def test_server_default_kv_keep_and_window_policy():
    s = Server("--kv-mib", "64", "--kv-keep", "0.5", "--kv-evict", "window")
    try:
        c = s.client()
        r = c.completions.create(model=MODEL_NAME, prompt=LONG, max_tokens=32, temperature=0,
                                 extra_body={"ignore_eos": True})
        assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 32
        # A request may still ask for everything kept.
        full = c.completions.create(model=MODEL_NAME, prompt=LONG, max_tokens=8, temperature=0,
                                    extra_body={"ignore_eos": True, "kv_keep": 1.0})
        assert full.usage.completion_tokens == 8
    finally:
        assert s.stop() == 0


def test_bad_server_default_is_refused_at_start():
    with pytest.raises(RuntimeError, match="kv_keep"):
        Server("--kv-mib", "64", "--kv-keep", "0")
