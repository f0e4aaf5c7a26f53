"""`drift serve --kv-cache-dir`: the KV disk tier through the server. A long prompt answered before
a restart is answered with the same greedy text after it, its prefix read from the directory (the
DISK samples of /metrics say so); a second server on the same directory is refused with an error
that says why, and the first keeps serving."""
import json
from concurrent.futures import ThreadPoolExecutor
import tempfile

import httpx

from conftest import MODEL_NAME, Server, greedy

# About 330 tokens of SmolLM2: 20 full pages of 16 tokens.
DOCUMENT = "".join(f"Entry {i}: the harbour bridge was inspected, painted and reopened.\n"
                   for i in range(24)) + "Summary:"


def tier_server(directory):
    # 16 MiB of KV (about 45 pages of SmolLM2) and a small disk budget: a light test.
    return Server("--kv-mib", "16", "--parallel", "4", "--kv-cache-dir", directory,
                  "--kv-cache-dir-gib", "0.25")


def engine_view(server):
    """The first snapshot the engine page's event stream sends."""
    with httpx.stream("GET", server.url + "/v1/engine/events", timeout=10) as r:
        for line in r.iter_lines():
            if line.startswith("data:"):
                return json.loads(line[len("data:"):])
    raise AssertionError("no snapshot on /v1/engine/events")


def stop_cleanly(server):
    code = server.stop()
    assert code == 0, f"drift serve exited with {code}:\n{server.log_text()[-4000:]}"


def test_a_restart_answers_from_the_directory_with_the_same_text():
    with tempfile.TemporaryDirectory(prefix="drift-kv-dir-") as directory:
        first = tier_server(directory)
        try:
            cold = greedy(first.client(), DOCUMENT, max_tokens=8).choices[0].text
        finally:
            stop_cleanly(first)  # writes what RAM caches to the directory
        second = tier_server(directory)
        try:
            warm = greedy(second.client(), DOCUMENT, max_tokens=8)
            assert warm.choices[0].text == cold
            m = second.metrics()
            assert m['drift:kv_tier_hit_pages_total{medium="DISK"}'] >= 15, m
            assert m['drift:kv_tier_pages{medium="DISK"}'] >= 15
            assert m["drift:kv_disk_read_failures_total"] == 0
            assert m["drift:kv_disk_read_bytes_total"] > 0
            assert m["drift:kv_disk_writes_ahead_total"] >= 0  # exported with the tier
            tier = engine_view(second)["disk_tier"]
            assert tier["pages_loaded"] >= 15 and tier["writes_dropped"] == 0, tier
            assert "pages_written_ahead" in tier
        finally:
            stop_cleanly(second)


def test_a_second_server_on_the_directory_is_refused():
    with tempfile.TemporaryDirectory(prefix="drift-kv-dir-") as directory:
        first = tier_server(directory)
        try:
            second = Server("--kv-mib", "16", "--kv-cache-dir", directory, wait=False)
            code = second.proc.wait(timeout=120)
            assert code != 0
            log = second.log_text()
            assert "in use by another drift process" in log, log[-2000:]
            assert f"pid {first.pid}" in log, log[-2000:]
            r = greedy(first.client(), "The capital of France is", max_tokens=4)
            assert r.model == MODEL_NAME and r.usage.completion_tokens == 4
        finally:
            stop_cleanly(first)


def test_a_preempted_request_is_swapped_to_the_directory_and_answers_as_alone():
    # 10 pages of 16 tokens; the two prompts and their 100 tokens take 8 each: the later request
    # is preempted, its pages swapped to the directory (--preemption swap) and read back.
    prompts = ["Explain to a child how rain forms, step by step, with an example from everyday "
               "life, and say why it matters.",
               "Write a short story about a lighthouse keeper who finds a message in a bottle."]
    with tempfile.TemporaryDirectory(prefix="drift-kv-dir-") as directory:
        server = Server("--kv-mib", "3.6", "--parallel", "2", "--admission", "optimistic",
                        "--preemption", "swap", "--kv-cache-dir", directory)
        try:
            client = server.client()

            def answer(prompt):
                return greedy(client, prompt, max_tokens=100,
                              extra_body={"ignore_eos": True}).choices[0].text

            alone = [answer(p) for p in prompts]
            with ThreadPoolExecutor(2) as pool:
                together = list(pool.map(answer, prompts))
            assert together == alone
            m = server.metrics()
            assert m['drift:kv_preemptions_total{mode="swap"}'] >= 1, m
            assert m['drift:kv_preemptions_total{mode="recompute"}'] == 0
            assert m['drift:kv_preemption_predicted_seconds_total{mode="swap"}'] > 0
            preemption = engine_view(server)["disk_tier"]["preemption"]
            assert preemption["swapped"] >= 1 and preemption["last"]["mode"] == "swap", preemption
        finally:
            stop_cleanly(server)
