"""A live `drift serve` on loopback for the integration tests.

The binary comes from $DRIFT_BIN (ctest sets it) or build/bin/drift; the model from
$DRIFT_TEST_MODEL or the default model in ${DRIFT_CACHE:-~/.cache/drift}. Each server starts on a
free port and is stopped with SIGTERM at the end, which must drain and exit 0.
"""
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import tempfile
import time

import httpx
import openai
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CACHE = pathlib.Path(os.environ.get("DRIFT_CACHE", pathlib.Path.home() / ".cache" / "drift"))
DRIFT_BIN = os.environ.get("DRIFT_BIN", str(ROOT / "build" / "bin" / "drift"))
MODEL = os.environ.get("DRIFT_TEST_MODEL", str(CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf"))
MODEL_NAME = "smollm2"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, *extra_args, api_key=None, wait=True, served_model_name=MODEL_NAME,
                 model=MODEL):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_key = api_key
        name = ["--served-model-name", served_model_name] if served_model_name else []
        args = [DRIFT_BIN, "serve", "-m", model, "--host", "127.0.0.1", "--port", str(self.port),
                *name, "--threads", "2", *extra_args]
        if api_key:
            args += ["--api-key", api_key]
        self.log = tempfile.NamedTemporaryFile(prefix="drift-serve-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        if wait:
            self.wait_ready()

    def wait_ready(self):
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"drift serve exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("drift serve did not become ready in 120 s:\n" + self.log_text())

    def log_text(self):
        return pathlib.Path(self.log.name).read_text(errors="replace")

    def headers(self):
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def client(self, **kw):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=self.api_key or "unused",
                             max_retries=0, timeout=120, **kw)

    def post(self, path, body, **kw):
        return httpx.post(self.url + path, json=body, headers=self.headers(), timeout=120, **kw)

    def metrics(self):
        """{name: value} for unlabelled-by-extra samples, {name{extra}: value} otherwise."""
        text = httpx.get(self.url + "/metrics", headers=self.headers(), timeout=10).text
        out = {}
        for line in text.splitlines():
            if line.startswith("#") or not line:
                continue
            m = re.match(r'^([^{\s]+)\{model_name="[^"]*"(,?[^}]*)\}\s+(\S+)$', line)
            assert m, f"unparseable metrics line: {line!r}"
            name, extra, value = m.group(1), m.group(2).lstrip(","), float(m.group(3))
            out[f"{name}{{{extra}}}" if extra else name] = value
        return out

    def proc_status(self):
        """Threads and resident memory (MiB) of the server process, from /proc."""
        fields = {}
        for line in pathlib.Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        return int(fields["Threads"]), int(fields["VmRSS"].split()[0]) / 1024

    def stop(self):
        """SIGTERM: the server drains and must exit 0."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        return code


@pytest.fixture(scope="session")
def server():
    # A KV cache of 256 MiB (about 11k tokens of SmolLM2) keeps the test light; 64 sequences.
    s = Server("--kv-mib", "256", "--parallel", "64", "--max-queued", "512")
    yield s
    code = s.stop()
    assert code == 0, f"drift serve exited with {code} after SIGTERM:\n{s.log_text()[-4000:]}"


@pytest.fixture(scope="session")
def client(server):
    return server.client()


def greedy(client, prompt, max_tokens=16, **kw):
    r = client.completions.create(model=MODEL_NAME, prompt=prompt, max_tokens=max_tokens,
                                  temperature=0, **kw)
    return r
