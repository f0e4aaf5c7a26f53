"""drift.ray under Ray Serve: two engine replicas (one thread each) behind Ray's HTTP proxy.

Not part of ctest (installing Ray takes one to four minutes); run it as docs/scale-out.md says:
    scripts/setup_ray_venv.sh
    PYTHONPATH=build/python ~/.cache/drift/venv-ray/bin/python -m pytest -s tests/ray

The official openai client talks to the proxy: completions and chat, whole and streamed. A
shared-prefix workload (8 long prompt prefixes in turn, each KV cache holding about 6 of them)
runs once with Ray's default router (power of two choices) and once with drift's
PrefixAffinityRouter; the replicas' own prefix cache counters give the hit rate of each, and
the client measures the time to first token. A mixed workload of unrelated prompts must reach
both replicas.
"""
import os
import pathlib
import socket
import statistics
import threading
import time

import httpx
import openai
import pytest
import ray
from ray import serve

from drift.ray import build_app

CACHE = pathlib.Path(os.environ.get("DRIFT_CACHE", pathlib.Path.home() / ".cache" / "drift"))
MODEL = os.environ.get("DRIFT_TEST_MODEL", str(CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf"))
NAME = "smollm2"
# A prompt is 368 tokens (23 pages of 16). 53 MiB of f16 KV is 150 pages (368,640 bytes each):
# the 4 prefixes a replica gets with affinity and two requests' working pages fit, all 8 do not.
ENGINE_ARGS = {"model": MODEL, "model_name": NAME, "num_replicas": "2", "threads": "1",
               "kv_mib": "53", "parallel": "4"}
GROUPS, ROUNDS = 8, 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prefix(group):
    body = " ".join(f"Clause {group}.{i}: item {i * 7 % 13} ships within {i % 5 + 2} days."
                    for i in range(22))
    return f"Contract {group} between supplier {group * 37 % 101} and buyer. {body}"


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    yield f"http://127.0.0.1:{port}"
    serve.shutdown()
    ray.shutdown()


def deploy(url, routing):
    serve.run(build_app({**ENGINE_ARGS, "routing": routing}), name="drift", route_prefix="/")
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if httpx.get(url + "/v1/models", timeout=2).status_code == 200:
                return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0,
                                     timeout=120)
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("the application did not come up")


def replica_stats(url):
    return httpx.get(url + "/v1/drift/replicas", timeout=10).json()


def streamed_ttft(client, prompt):
    """(time to first token, text, replica) of a streamed completion."""
    start = time.perf_counter()
    first, text = None, ""
    raw = client.completions.with_raw_response.create(
        model=NAME, prompt=prompt, max_tokens=8, temperature=0, stream=True)
    for chunk in raw.parse():
        if chunk.choices and chunk.choices[0].text and first is None:
            first = time.perf_counter() - start
        text += chunk.choices[0].text if chunk.choices else ""
    return first, text, raw.headers["x-drift-replica"]


def run_shared_prefix(client, url):
    """The 8 prefixes in turn, ROUNDS times, two requests at a time; (hit rate, TTFTs, the
    replicas that served each prefix)."""
    before = replica_stats(url)
    jobs = [(g, prefix(g) + f" Question {r}: when does item {r} ship?")
            for r in range(ROUNDS) for g in range(GROUPS)]
    ttfts, replicas, lock = [], {}, threading.Lock()

    errors = []

    def worker(items):
        try:
            for g, p in items:
                ttft, _, replica = streamed_ttft(client, p)
                with lock:
                    ttfts.append(ttft)
                    replicas.setdefault(g, set()).add(replica)
        except Exception as e:  # noqa: BLE001 - reported by the test's thread
            errors.append(e)

    # Consecutive prompts go to the two workers, so the order of prefixes stays round-robin.
    threads = [threading.Thread(target=worker, args=(jobs[i::2],)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    time.sleep(0.5)  # the last report of each replica
    after = replica_stats(url)
    hit = sum(s["prefix_cache_hit_tokens"] for s in after.values()) - \
        sum(s["prefix_cache_hit_tokens"] for s in before.values())
    queried = sum(s["prefix_cache_queried_tokens"] for s in after.values()) - \
        sum(s["prefix_cache_queried_tokens"] for s in before.values())
    return hit / queried, ttfts, replicas


def test_openai_routes_through_the_proxy_and_affinity_raises_the_hit_rate(cluster):
    url = cluster
    figures = {}
    for routing in ("power_of_two", "prefix_affinity"):
        client = deploy(url, routing)
        if routing == "prefix_affinity":
            # The OpenAI routes, through Ray's proxy, with the official client.
            whole = client.completions.create(model=NAME, prompt="The capital of France is",
                                              max_tokens=12, temperature=0)
            _, streamed, _ = streamed_ttft(client, "The capital of France is")
            assert whole.choices[0].text.startswith(streamed) and streamed
            assert whole.usage.completion_tokens >= 8
            chat = client.chat.completions.create(
                model=NAME, messages=[{"role": "user", "content": "Name a color."}],
                max_tokens=16, temperature=0)
            stream = client.chat.completions.create(
                model=NAME, messages=[{"role": "user", "content": "Name a color."}],
                max_tokens=16, temperature=0, stream=True)
            assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == \
                chat.choices[0].message.content
            with pytest.raises(openai.BadRequestError, match="temperature"):
                client.completions.create(model=NAME, prompt="x", temperature=-1)

        hit_rate, ttfts, replicas = run_shared_prefix(client, url)
        # A mixed workload: unrelated short prompts reach both replicas.
        mixed = [streamed_ttft(client, f"Story number {i}: once upon a time")[2]
                 for i in range(8)]
        stats = replica_stats(url)
        assert len(stats) == 2, stats
        assert all(s["prefix_cache_queries"] > 0 for s in stats.values()), "both replicas served"
        assert len(set().union(*replicas.values())) == 2 and len(set(mixed)) == 2, \
            (replicas, mixed)
        if routing == "prefix_affinity":
            assert all(len(r) == 1 for r in replicas.values()), \
                f"a prefix stays on one replica: {replicas}"
        figures[routing] = (hit_rate, statistics.median(ttfts), statistics.mean(ttfts))
        serve.delete("drift")

    for routing, (rate, median, mean) in figures.items():
        print(f"\n{routing}: prefix cache hit rate {rate:.1%}, TTFT median {median * 1000:.0f} ms"
              f" mean {mean * 1000:.0f} ms")
    assert figures["prefix_affinity"][0] > figures["power_of_two"][0] + 0.2
    assert figures["prefix_affinity"][1] < figures["power_of_two"][1]
