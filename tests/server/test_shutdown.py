"""Shutdown as an operator and a load balancer see it: queued requests are refused at once (503,
retry elsewhere), /health answers 503 "draining" until the process exits, started streams
finish, the log counts what the shutdown cut, and a second signal exits at once."""
import re
import signal
import threading
import time

import httpx

from conftest import MODEL_NAME, Server


def long_stream(server, max_tokens, chunks, first):
    try:
        stream(server, max_tokens, chunks, first)
    except httpx.RemoteProtocolError:
        chunks.append("<connection lost>")  # the second-signal test kills the process


def stream(server, max_tokens, chunks, first):
    with httpx.stream("POST", server.url + "/v1/completions", timeout=120,
                      json={"model": MODEL_NAME, "prompt": "Once upon a time",
                            "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
                            "stream": True}) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                chunks.append(line[6:])
                first.set()


def test_drain_refuses_queued_requests_at_once_and_health_says_draining():
    server = Server("--parallel", "1", "--drain-timeout", "180")
    chunks, first = [], threading.Event()
    # Long enough (seconds even at full speed) that the stream is still running when the health
    # probe below is sent (160 tokens ended within the 0.5 s sleep on a fast machine), and short
    # enough to end within the drain timeout on a busy one.
    running = threading.Thread(target=long_stream, args=(server, 800, chunks, first))
    running.start()
    assert first.wait(60)
    queued = []

    def post():
        t0 = time.time()
        r = server.post("/v1/completions", {"model": MODEL_NAME, "prompt": "Hi", "max_tokens": 4})
        queued.append((r.status_code, r.headers.get("retry-after"), r.text, time.time()))

    waiters = [threading.Thread(target=post) for _ in range(2)]
    for t in waiters:
        t.start()
    time.sleep(0.5)  # both wait behind the one sequence --parallel 1 allows
    signalled = time.time()
    server.proc.send_signal(signal.SIGTERM)
    for t in waiters:
        t.join(10)
    # Refused at once, not after the stream (800 tokens) ends.
    assert len(queued) == 2, queued
    for status, retry_after, text, at in queued:
        assert status == 503 and retry_after == "1", text
        assert "had not started" in text
        assert at - signalled < 3
    # While the stream finishes, probes still get an answer: 503 "draining".
    r = httpx.get(server.url + "/health", timeout=5)
    assert r.status_code == 503 and r.json()["status"] == "draining"
    r = server.post("/v1/completions", {"model": MODEL_NAME, "prompt": "Hi", "max_tokens": 4})
    assert r.status_code == 503
    running.join(120)
    assert server.proc.wait(60) == 0
    assert chunks[-1] == "[DONE]" and '"finish_reason":"length"' in chunks[-2]
    log = server.log_text()
    assert "1 requests running, 2 queued (refused now)" in log, log[-3000:]
    assert "the shutdown cut 2 requests (2 of them before their first token)" in log, log[-3000:]


def test_requests_cut_at_the_drain_timeout_are_logged_with_their_tokens():
    server = Server("--drain-timeout", "1")
    chunks, first = [], threading.Event()
    running = threading.Thread(target=long_stream, args=(server, 3000, chunks, first))
    running.start()
    assert first.wait(60)
    time.sleep(0.5)
    server.proc.send_signal(signal.SIGTERM)
    running.join(60)
    assert server.proc.wait(60) == 0
    streamed = sum('"text"' in c for c in chunks)
    assert any('"error"' in c for c in chunks), chunks[-3:]  # the client learns it was cut
    log = server.log_text()
    m = re.search(r"the shutdown cut 1 requests \(0 of them before their first token\), which "
                  r"had generated (\d+) tokens", log)
    assert m, log[-3000:]
    assert int(m[1]) >= streamed - 1 > 0
    access = re.search(r"access request_id=\S+ id=\d+ method=POST path=/v1/completions "
                       r"status=200 prompt_tokens=\d+ "
                       r"completion_tokens=(\d+)", log)
    assert access and int(access[1]) == int(m[1]), log[-3000:]


def test_second_signal_exits_at_once():
    server = Server("--drain-timeout", "120")
    chunks, first = [], threading.Event()
    running = threading.Thread(target=long_stream, args=(server, 3000, chunks, first))
    running.start()
    assert first.wait(60)
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    t0 = time.time()
    server.proc.send_signal(signal.SIGINT)
    assert server.proc.wait(10) == 1
    assert time.time() - t0 < 3
    running.join(30)
    assert chunks[-1] == "<connection lost>"
    assert "second signal" in server.log_text()
