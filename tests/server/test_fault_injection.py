"""The executor failing for good under load (`--debug-fail-at-step K`, as a kernel fault would):
every open stream ends with an SSE error object and closes, a request waiting for its whole reply
gets a 5xx with a message, /health turns 503 "unhealthy", new requests are refused with 503, and
the process exits 3 after --unhealthy-exit-delay, as README says. Every wait has a timeout, so a
hang fails the test instead of stalling the suite."""
import json
import threading
import time

import httpx
import openai
import pytest

from conftest import Server

FAIL_AT_STEP = 300  # late enough that every stream below has its first token by then
STREAMS = 4
MAX_TOKENS = 600  # longer than FAIL_AT_STEP steps, and all 5 requests fit the KV cache at once


def summary(results):
    return {k: (r["status"], len(r.get("events", [])), r.get("events", [""])[-2:])
            for k, r in results.items()}


def read_stream(server, results, index, first_token):
    """Reads one streamed completion; records its data lines and whether it closed."""
    events = []
    body = {"model": "smollm2", "prompt": f"Count to a thousand, take {index}:",
            "max_tokens": MAX_TOKENS, "ignore_eos": True, "stream": True}
    try:
        with httpx.stream("POST", server.url + "/v1/completions", json=body,
                          timeout=httpx.Timeout(60)) as r:
            results[index] = {"status": r.status_code, "events": events, "closed": False}
            for line in r.iter_lines():
                if line.startswith("data: "):
                    events.append(line[len("data: "):])
                    if len(events) == 1:
                        first_token.release()
            results[index]["closed"] = True
    except httpx.HTTPError as e:
        results[index] = {"status": None, "events": events, "closed": False, "error": repr(e)}


def whole_request(server, results):
    client = server.client().with_options(timeout=60)
    try:
        client.completions.create(model="smollm2", prompt="Tell a long story:", max_tokens=MAX_TOKENS,
                                  extra_body={"ignore_eos": True})
        results["whole"] = {"status": 200}
    except openai.APIStatusError as e:
        results["whole"] = {"status": e.status_code, "body": e.response.json()}


def test_an_executor_failure_ends_every_stream_with_an_error_and_exits_3():
    # The exit delay leaves the checks below time to run on a loaded machine (3 s did not, once).
    server = Server("--kv-mib", "256", "--parallel", "8", "--debug-fail-at-step",
                    str(FAIL_AT_STEP), "--unhealthy-exit-delay", "10")
    try:
        assert httpx.get(server.url + "/health", timeout=10).status_code == 200
        results = {}
        first_token = threading.Semaphore(0)
        threads = [threading.Thread(target=read_stream, args=(server, results, i, first_token))
                   for i in range(STREAMS)]
        threads.append(threading.Thread(target=whole_request, args=(server, results)))
        for t in threads:
            t.start()
        for _ in range(STREAMS):
            assert first_token.acquire(timeout=60), f"a stream got no token: {summary(results)}"
        # The official client sees the error event of its stream as an APIError.
        client = server.client().with_options(timeout=60)
        with pytest.raises(openai.APIError):
            for _ in client.completions.create(model="smollm2", prompt="Again:", max_tokens=MAX_TOKENS,
                                               stream=True, extra_body={"ignore_eos": True}):
                pass
        for t in threads:
            t.join(timeout=60)
            assert not t.is_alive(), "a request hung after the executor failed"

        for i in range(STREAMS):
            r = results[i]
            assert r["status"] == 200 and r["closed"], r
            tokens = [e for e in r["events"] if e != "[DONE]" and "error" not in json.loads(e)]
            assert tokens, f"stream {i} was not open when the executor failed: {r}"
            errors = [json.loads(e)["error"] for e in r["events"]
                      if e != "[DONE]" and "error" in json.loads(e)]
            assert len(errors) == 1, r["events"][-3:]
            assert "injected executor failure" in errors[0]["message"] or \
                "unhealthy" in errors[0]["message"], errors[0]
            # The error is the stream's last event (then [DONE]); nothing follows it.
            assert r["events"][-1] == "[DONE]" and "error" in json.loads(r["events"][-2])
        whole = results["whole"]
        assert whole["status"] in (500, 503), whole
        assert whole["body"]["error"]["message"], whole

        # Unhealthy from now on: /health and new requests are 503 until the process exits.
        health = httpx.get(server.url + "/health", timeout=10)
        assert health.status_code == 503 and health.json() == {"status": "unhealthy"}
        with pytest.raises(openai.APIStatusError) as refused:
            client.completions.create(model="smollm2", prompt="Hello", max_tokens=4)
        assert refused.value.status_code == 503
        assert "unhealthy" in refused.value.response.json()["error"]["message"]

        code = server.proc.wait(timeout=40)
        assert code == 3, server.log_text()[-3000:]
        assert "the engine failed" in server.log_text()
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(timeout=10)
