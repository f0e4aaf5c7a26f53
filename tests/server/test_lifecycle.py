"""The server's life: 503 "loading" before the model is ready, --version, and SIGTERM draining an
in-flight stream to its end before exiting 0."""
import subprocess
import threading
import time

import httpx

from conftest import DRIFT_BIN, MODEL_NAME, Server


def test_version():
    out = subprocess.run([DRIFT_BIN, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("drift ")


def test_loading_then_ready_then_drain():
    server = Server("--kv-mib", "64", "--parallel", "4", wait=False)
    statuses, refused_while_loading = [], False
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            r = httpx.get(server.url + "/health", timeout=1)
            statuses.append((r.status_code, r.json()["status"]))
            if r.status_code == 200:
                break
            # Work is refused while loading, with Retry-After (unless loading just finished).
            c = httpx.post(server.url + "/v1/completions", json={"prompt": "x", "max_tokens": 1},
                           timeout=5)
            if c.status_code != 200:
                assert c.status_code == 503 and c.headers["retry-after"] == "1", c.text
                refused_while_loading = True
        except httpx.ConnectError:
            pass  # not listening yet
        time.sleep(0.01)
    assert statuses[0] == (503, "loading"), statuses[:3]
    assert statuses[-1] == (200, "ok")
    assert refused_while_loading

    # A stream in flight when SIGTERM arrives still runs to its end; then the process exits 0.
    chunks, first = [], threading.Event()

    def stream():
        with httpx.stream("POST", server.url + "/v1/completions", timeout=120,
                          json={"model": MODEL_NAME, "prompt": "Once upon a time", "max_tokens": 48,
                                "temperature": 0, "ignore_eos": True, "stream": True}) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    chunks.append(line[6:])
                    first.set()

    t = threading.Thread(target=stream)
    t.start()
    assert first.wait(60)
    code = server.stop()
    t.join()
    assert code == 0, server.log_text()[-3000:]
    assert chunks[-1] == "[DONE]"
    assert '"finish_reason":"length"' in chunks[-2]
    assert sum('"text"' in c for c in chunks) >= 48
    assert "drift serve: draining" in server.log_text()
