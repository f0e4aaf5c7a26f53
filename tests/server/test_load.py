"""Many clients at once: 256 concurrent streams each get their solo greedy answer; 100 clients
that vanish mid-request leave nothing running and every KV page free; four times the queue
limit at once is refused quickly with 429 while every admitted request completes."""
import asyncio
import random
import socket
import threading
import time

import httpx
import openai
import pytest

from conftest import MODEL_NAME, Server

PROMPTS = [
    "The capital of France is",
    "Water boils at",
    "A haiku about the sea:",
    "def fibonacci(n):",
    "The best way to learn a language is",
    "Once upon a time, in a small village,",
    "List three primary colors:",
    "The speed of light is",
]
MAX_TOKENS = 16


def async_client(server, connections):
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0,
                              timeout=300,
                              http_client=openai.DefaultAsyncHttpxClient(limits=limits, timeout=300))


class ProcessSampler:
    """Samples the server's thread count and RSS every 50 ms while the load runs."""

    def __init__(self, server):
        self.server, self.samples, self._stop = server, [], threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self):
        while not self._stop.is_set():
            self.samples.append(self.server.proc_status())
            time.sleep(0.05)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def test_256_concurrent_streams_match_solo_greedy(server, client):
    solo = {p: client.completions.create(model=MODEL_NAME, prompt=p, max_tokens=MAX_TOKENS,
                                         temperature=0).choices[0].text for p in PROMPTS}
    idle_threads, idle_rss = server.proc_status()

    async def one(aclient, i, started):
        prompt = PROMPTS[i % len(PROMPTS)]
        stream = await aclient.completions.create(model=MODEL_NAME, prompt=prompt,
                                                  max_tokens=MAX_TOKENS, temperature=0, stream=True)
        started.append(i)
        text, finish = "", None
        async for chunk in stream:
            text += chunk.choices[0].text
            finish = chunk.choices[0].finish_reason or finish
        return prompt, text, finish

    async def run_all():
        aclient = async_client(server, 300)
        started = []
        results = await asyncio.gather(*(one(aclient, i, started) for i in range(256)))
        await aclient.close()
        return results

    t0 = time.time()
    with ProcessSampler(server) as sampler:
        results = asyncio.run(run_all())
    elapsed = time.time() - t0
    peak_threads = max(t for t, _ in sampler.samples)
    peak_rss = max(r for _, r in sampler.samples)
    print(f"\n256 concurrent streams in {elapsed:.1f} s: server threads idle {idle_threads}, "
          f"peak {peak_threads}; RSS idle {idle_rss:.0f} MiB, peak {peak_rss:.0f} MiB")
    for prompt, text, finish in results:
        assert finish in ("stop", "length")
        assert text == solo[prompt], prompt
    # One I/O thread, no thread per connection.
    assert peak_threads <= idle_threads + 2


def disconnect_at_random(port, body, delay):
    """Sends a request on a raw socket, reads for `delay` seconds, then closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        data = body.encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        s.settimeout(0.05)
        end = time.time() + delay
        while time.time() < end:
            try:
                if not s.recv(65536):
                    return
            except socket.timeout:
                pass


def test_100_random_disconnects_free_everything(server):
    rng = random.Random(1234)
    before = server.metrics()
    threads = []
    for i in range(100):
        stream = "true" if i % 2 else "false"
        body = (f'{{"prompt": "{PROMPTS[i % len(PROMPTS)]}", "max_tokens": 1500, '
                f'"ignore_eos": true, "stream": {stream}}}')
        t = threading.Thread(target=disconnect_at_random, args=(server.port, body, rng.uniform(0, 1.5)))
        threads.append(t)
        t.start()
    for t in threads:
        t.join()
    deadline = time.time() + 30
    while True:
        m = server.metrics()
        if (m["vllm:num_requests_running"] == 0 and m["vllm:num_requests_waiting"] == 0
                and m["drift:kv_pages_used"] == 0) or time.time() > deadline:
            break
        time.sleep(0.1)
    assert m["vllm:num_requests_running"] == 0
    assert m["vllm:num_requests_waiting"] == 0
    assert m["drift:kv_pages_used"] == 0
    assert m["drift:kv_pages_free"] + m["drift:kv_pages_cached"] == m["drift:kv_pages_total"]
    # Every one of them was cut short (1,500 tokens cannot finish in 1.5 s here).
    assert m["drift:client_disconnects_total"] - before["drift:client_disconnects_total"] == 100
    assert (m['vllm:request_success_total{finished_reason="cancelled"}']
            - before['vllm:request_success_total{finished_reason="cancelled"}']) == 100


QUEUE_LIMIT = 8


@pytest.fixture(scope="module")
def small_server():
    s = Server("--kv-mib", "64", "--parallel", "2", "--max-queued", str(QUEUE_LIMIT),
               api_key="sekret")
    yield s
    assert s.stop() == 0, s.log_text()[-4000:]


def test_api_key(small_server):
    url = small_server.url
    assert httpx.get(url + "/health").status_code == 200  # stays open
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Bearer sekret2"},
                    {"Authorization": "sekret"}):
        r = httpx.post(url + "/v1/completions", json={"prompt": "Hi", "max_tokens": 2},
                       headers=headers)
        assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=url + "/v1", api_key="nope", max_retries=0).models.list()
    assert small_server.client().models.list().data[0].id == MODEL_NAME


def test_overload_refuses_excess_at_once(small_server):
    total = 4 * QUEUE_LIMIT
    results = [None] * total

    def one(i):
        t0 = time.time()
        r = httpx.post(small_server.url + "/v1/completions", headers=small_server.headers(),
                       json={"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": 24,
                             "temperature": 0, "ignore_eos": True}, timeout=300)
        results[i] = (r, time.time() - t0)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(total)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = [(r, s) for r, s in results if r.status_code == 200]
    refused = [(r, s) for r, s in results if r.status_code == 429]
    print(f"\noverload: {total} at once, queue limit {QUEUE_LIMIT}, 2 running: {len(ok)} served, "
          f"{len(refused)} refused (slowest refusal {max(s for _, s in refused):.3f} s)")
    assert len(ok) + len(refused) == total, [r.status_code for r, _ in results]
    assert len(ok) >= QUEUE_LIMIT and len(refused) >= total - QUEUE_LIMIT - 2 - 4
    for r, seconds in refused:
        assert r.headers["retry-after"] == "1"
        assert r.json()["error"]["code"] == "overloaded"
        assert seconds < 2.0  # refused at once, not after waiting
    for r, _ in ok:
        body = r.json()
        assert body["choices"][0]["finish_reason"] == "length"
        assert body["usage"]["completion_tokens"] == 24
