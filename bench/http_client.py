"""A small streaming client for OpenAI-compatible servers (drift serve, llama-server) and the
processes behind them, for the HTTP benchmarks in bench/. Standard library only.

  with ServerProcess.drift(model, port, ["--parallel", "16"]) as server:
      result = stream_completion(server.url, {"prompt": "...", "max_tokens": 16})
      result.ttft, result.token_times, result.text
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request

from bench_common import DRIFT


class StreamResult:
    def __init__(self):
        self.start = 0.0
        self.token_times = []  # arrival time of each chunk that carried text
        self.text = ""
        self.finish_reason = None
        self.usage = None
        self.error = None

    @property
    def ttft(self):
        return self.token_times[0] - self.start if self.token_times else None

    @property
    def end_to_end(self):
        return (self.token_times[-1] if self.token_times else time.perf_counter()) - self.start

    def inter_token_gaps(self):
        return [b - a for a, b in zip(self.token_times, self.token_times[1:])]


def stream_completion(url, body, path="/v1/completions", timeout=600):
    """POSTs `body` with stream on and reads the SSE events; times each text-carrying chunk."""
    body = dict(body, stream=True, stream_options={"include_usage": True})
    parts = urllib.parse.urlsplit(url)
    result = StreamResult()
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        result.start = time.perf_counter()
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        if response.status != 200:
            result.error = f"HTTP {response.status}: {response.read()[:300]!r}"
            return result
        for raw in response:
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            if "error" in chunk:
                result.error = str(chunk["error"])
                break
            if chunk.get("usage"):
                result.usage = chunk["usage"]
            for choice in chunk.get("choices", []):
                piece = choice.get("text")
                if piece is None:
                    piece = (choice.get("delta") or {}).get("content") or ""
                if piece:
                    result.token_times.append(time.perf_counter())
                    result.text += piece
                if choice.get("finish_reason"):
                    result.finish_reason = choice["finish_reason"]
    except (OSError, http.client.HTTPException) as e:
        result.error = f"{type(e).__name__}: {e}"
    finally:
        conn.close()
    return result


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """A server started for a benchmark, ready (GET /health == 200) on entry, stopped on exit."""

    def __init__(self, name, argv, port):
        self.name, self.argv, self.port = name, argv, port
        self.url = f"http://127.0.0.1:{port}"
        self.process = None

    @classmethod
    def drift(cls, model, extra_args=(), drift=DRIFT, port=None):
        port = port or free_port()
        return cls("drift", [drift, "serve", "-m", model, "--host", "127.0.0.1", "--port",
                             str(port), *extra_args], port)

    @classmethod
    def llama(cls, llama_bin, model, extra_args=(), port=None):
        port = port or free_port()
        return cls("llama.cpp", [os.path.join(llama_bin, "llama-server"), "-m", model, "--host",
                                 "127.0.0.1", "--port", str(port), *extra_args], port)

    def __enter__(self):
        self.process = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.process.returncode}: "
                                   f"{' '.join(self.argv)}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not become ready: {' '.join(self.argv)}")

    def __exit__(self, *exc):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
