#!/usr/bin/env python3
"""A soak run of `drift serve` (not run in CI): mixed load for a long time — whole and streamed
completions, chat, streams cancelled or abandoned mid-way, session turns and session deletes,
structured output (JSON schema, JSON object, regex, choice; streamed and whole), tool-call round
trips, malformed requests and the hostile ones of the second abuse pass (deep JSON inside a
string, a costly regex, grammars no output can follow, template built-ins in
chat_template_kwargs) — while the server's resident memory, open file descriptors, KV pages and
running/waiting requests are sampled every --sample-seconds. Standard library only (the PNG needs
Debian's python3-matplotlib; run with /usr/bin/python3 if another python3 comes first).

  bench/soak.py [--minutes 60] [-m MODEL] [--drift BINARY] [--concurrency 8] [--png soak.png]
                [--json soak.json]
  bench/soak.py --url http://127.0.0.1:8080 --pid PID ...   # a server started elsewhere

Pass (exit 0) when, after the warm-up (the first --warmup-fraction of the run):
  - RSS stays within 5% of its first post-warm-up sample,
  - open file descriptors do not grow (at the end, idle, at most the count at the start + 2),
  - no KV page stays used once the load stops (cached prefix pages are not "used"),
  - every request got an answer: a status line (2xx/4xx/429/503 all count), or a stream that
    ended with [DONE] or an error event; only connection errors and timeouts are failures.
"""
import argparse
import http.client
import json
import os
import random
import sys
import threading
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import DRIFT, default_model  # noqa: E402
from http_client import ServerProcess  # noqa: E402

PROMPTS = [
    "Once upon a time, in a small village,",
    "The three primary colors are",
    "def fibonacci(n):",
    "Write a short poem about the sea.",
    "The speed of light is",
    "List five fruits:",
]


class Client:
    """One HTTP/1.1 request per call on a fresh connection; returns (status, body) or raises."""

    def __init__(self, url, timeout):
        parts = urllib.parse.urlsplit(url)
        self.host, self.port, self.timeout = parts.hostname, parts.port, timeout

    def connect(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def request(self, method, path, body=None):
        conn = self.connect()
        try:
            conn.request(method, path, json.dumps(body) if body is not None else None,
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def stream(self, path, body, stop_after=None):
        """Reads a stream to [DONE] (True), or drops the connection after `stop_after` events
        (None). An error event counts as an answer too."""
        conn = self.connect()
        try:
            conn.request("POST", path, json.dumps(dict(body, stream=True)),
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            if r.status != 200:
                r.read()
                return r.status
            events = 0
            for raw in r:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                if line == "data: [DONE]" or line.startswith('data: {"error"'):
                    return 200
                events += 1
                if stop_after is not None and events >= stop_after:
                    return None  # abandoned on purpose: closing the socket cancels it
            raise ConnectionError("stream ended without [DONE]")
        finally:
            conn.close()


PERSON_SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                                 "age": {"type": "integer"}},
                 "required": ["name"]}
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


class Load:
    """--concurrency workers, each picking a random action until stopped."""

    def __init__(self, client, model_name, seed, concurrency):
        self.client, self.model = client, model_name
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.counts = {}    # action -> answered
        self.failures = []  # (action, error)
        self.threads = [threading.Thread(target=self.worker, args=(seed + i,), daemon=True)
                        for i in range(concurrency)]

    def record(self, action, error=None):
        with self.lock:
            if error is None:
                self.counts[action] = self.counts.get(action, 0) + 1
            else:
                self.failures.append((action, error))

    def worker(self, seed):
        rng = random.Random(seed)
        while not self.stop.is_set():
            action = rng.choices(
                ["complete", "stream", "abandon", "chat", "session", "structured", "tools",
                 "bad", "hostile"],
                weights=[20, 30, 15, 10, 20, 10, 8, 5, 2])[0]
            try:
                getattr(self, action)(rng)
                self.record(action)
            except Exception as e:  # noqa: BLE001 - every kind of failure is reported
                self.record(action, f"{type(e).__name__}: {e}")

    def body(self, rng, **kw):
        return dict({"model": self.model, "prompt": rng.choice(PROMPTS),
                     "max_tokens": rng.randint(4, 96), "temperature": 0.8}, **kw)

    def complete(self, rng):
        status, _ = self.client.request("POST", "/v1/completions", self.body(rng))
        assert status in (200, 429, 503), status

    def stream(self, rng):
        status = self.client.stream("/v1/completions", self.body(rng))
        assert status in (200, 429, 503), status

    def abandon(self, rng):
        self.client.stream("/v1/completions", self.body(rng, max_tokens=400, ignore_eos=True),
                           stop_after=rng.randint(1, 20))

    def chat(self, rng):
        status, _ = self.client.request("POST", "/v1/chat/completions", {
            "model": self.model, "max_tokens": rng.randint(4, 64),
            "messages": [{"role": "user", "content": rng.choice(PROMPTS)}]})
        assert status in (200, 429, 503), status

    def session(self, rng):
        sid = f"soak-{rng.getrandbits(48):x}"
        for _ in range(rng.randint(1, 4)):
            status, _ = self.client.request("POST", "/v1/completions",
                                            self.body(rng, session_id=sid, max_tokens=16))
            assert status in (200, 409, 429, 503), status
        if rng.random() < 0.8:  # the rest expire by TTL
            status, _ = self.client.request("DELETE", f"/v1/sessions/{sid}")
            assert status in (200, 404), status

    def structured(self, rng):
        # Each way of constraining the output, streamed or not; the reply must follow it.
        kind = rng.choice(["json_schema", "json_object", "regex", "choice"])
        extra = {
            "json_schema": {"response_format": {"type": "json_schema", "json_schema": {
                "name": "person", "schema": PERSON_SCHEMA}}},
            "json_object": {"response_format": {"type": "json_object"}},
            "regex": {"guided_regex": "[0-9]{3}-[0-9]{4}"},
            "choice": {"guided_choice": ["yes", "no", "maybe"]},
        }[kind]
        body = {"model": self.model, "max_tokens": 48, "temperature": 0.8,
                "messages": [{"role": "user", "content": rng.choice(PROMPTS)}], **extra}
        if rng.random() < 0.5:
            status = self.client.stream("/v1/chat/completions", dict(body, stream=True))
            assert status in (200, 429, 503), status
            return
        status, reply = self.client.request("POST", "/v1/chat/completions", body)
        assert status in (200, 429, 503), status
        if status != 200 or kind != "json_schema":
            return
        choice = json.loads(reply)["choices"][0]
        if choice["finish_reason"] == "stop":  # complete: it parses and has the required key
            assert "name" in json.loads(choice["message"]["content"]), choice

    def tools(self, rng):
        # A tool round trip: the call (free or required), then its result in the next turn.
        messages = [{"role": "user", "content": "What is the weather in Paris?"}]
        choice = rng.choice(["auto", "required"])
        status, reply = self.client.request("POST", "/v1/chat/completions", {
            "model": self.model, "max_tokens": 64, "temperature": 0.8, "tools": [WEATHER_TOOL],
            "tool_choice": choice, "messages": messages})
        assert status in (200, 429, 503), status
        if status != 200:
            return
        message = json.loads(reply)["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        if not calls:
            return
        messages += [message, {"role": "tool", "tool_call_id": calls[0]["id"], "content": "18 C"}]
        status, _ = self.client.request("POST", "/v1/chat/completions", {
            "model": self.model, "max_tokens": 32, "tools": [WEATHER_TOOL], "messages": messages})
        assert status in (200, 429, 503), status

    def hostile(self, rng):
        # The requests of the second abuse pass: each must be a 4xx, and the server must stay up.
        deep = '{"a":' * 10000 + "1" + "}" * 10000
        body = rng.choice([
            {"guided_json": deep},
            {"guided_regex": "(a{1000}){1000}"},
            {"guided_json": {"$ref": "#"}},
            {"guided_grammar": "start: a\na: b\nb: a\n"},
            {"chat_template_kwargs": {"raise_exception": 1}},
        ])
        status, _ = self.client.request("POST", "/v1/chat/completions", {
            "model": self.model, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}],
            **body})
        assert 400 <= status < 500 or status == 429, status

    def bad(self, rng):
        body = rng.choice([b"{", b'{"prompt": 5}', b'{"prompt": "x", "max_tokens": -1}',
                           b'{"prompt": "x", "session_id": "a/b"}'])
        conn = self.client.connect()
        try:
            conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            assert 400 <= r.status < 500, r.status
        finally:
            conn.close()


def metrics(url):
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, value = line.rpartition(" ")
        out[name.split("{")[0] if "le=" not in name else name] = float(value)
    return out


def sample(url, pid, t0):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    m = metrics(url)
    return {"t": time.time() - t0,
            "rss_mib": int(fields["VmRSS"].split()[0]) / 1024,
            "fds": len(os.listdir(f"/proc/{pid}/fd")),
            "threads": int(fields["Threads"]),
            "kv_pages_used": m.get("drift:kv_pages_used", 0),
            "kv_pages_cached": m.get("drift:kv_pages_cached", 0),
            "running": m.get("vllm:num_requests_running", 0),
            "waiting": m.get("vllm:num_requests_waiting", 0),
            "connections": m.get("drift:http_open_connections", 0)}


def draw(samples, warmup_s, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: no matplotlib (Debian python3-matplotlib); PNG skipped", file=sys.stderr)
        return
    t = [s["t"] / 60 for s in samples]
    fig, axes = plt.subplots(4, 1, figsize=(9, 10), sharex=True)
    for ax, keys, label in [(axes[0], ["rss_mib"], "RSS (MiB)"),
                            (axes[1], ["fds", "connections"], "descriptors / connections"),
                            (axes[2], ["kv_pages_used", "kv_pages_cached"], "KV pages"),
                            (axes[3], ["running", "waiting"], "requests")]:
        for k in keys:
            ax.plot(t, [s[k] for s in samples], label=k)
        ax.axvline(warmup_s / 60, color="grey", linestyle=":")
        ax.set_ylabel(label)
        ax.legend(loc="upper left")
    axes[-1].set_xlabel("minutes")
    fig.suptitle("drift serve soak")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


def judge(samples, end, start, load, warmup_s):
    verdicts = []
    after = [s for s in samples if s["t"] >= warmup_s] or samples[-1:]
    base = after[0]["rss_mib"]
    worst = max(s["rss_mib"] for s in after)
    verdicts.append((worst <= base * 1.05,
                     f"RSS after warm-up {base:.1f} -> max {worst:.1f} MiB (limit +5%)"))
    verdicts.append((end["fds"] <= start["fds"] + 2,
                     f"open fds idle at start {start['fds']}, idle at end {end['fds']}"))
    verdicts.append((end["kv_pages_used"] == 0,
                     f"KV pages used once idle: {end['kv_pages_used']:.0f}"))
    answered = sum(load.counts.values())
    verdicts.append((not load.failures,
                     f"{answered} actions answered, {len(load.failures)} failed"
                     + (f" (first: {load.failures[0]})" if load.failures else "")))
    return verdicts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("-m", "--model", default=None)
    # An hour-long run outlives many rebuilds of build/: a copy of the binary keeps it steady.
    ap.add_argument("--drift", default=DRIFT, help="the drift binary (default: build/bin/drift)")
    ap.add_argument("--url", help="a running server (with --pid); default: start one")
    ap.add_argument("--pid", type=int)
    ap.add_argument("--served-model-name", default="soak")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--sample-seconds", type=float, default=10)
    ap.add_argument("--warmup-fraction", type=float, default=0.15)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--png", default="soak.png")
    ap.add_argument("--json", default=None)
    # A small KV pool: its pages are first touched (RSS grows) as the prefix cache fills them,
    # which must be over by the end of the warm-up for the RSS criterion to mean "no leak".
    ap.add_argument("--server-args", default="--parallel 16 --session-ttl 30 --kv-mib 128",
                    help="extra `drift serve` arguments when the script starts the server")
    args = ap.parse_args()

    if args.url:
        if not args.pid:
            ap.error("--url needs --pid (RSS and descriptors are read from /proc)")
        run(args, args.url, args.pid, args.served_model_name)
        return
    model = args.model or default_model()
    extra = ["--served-model-name", args.served_model_name, *args.server_args.split()]
    with ServerProcess.drift(model, extra, drift=args.drift) as server:
        run(args, server.url, server.process.pid, args.served_model_name)


def run(args, url, pid, model_name):
    duration = args.minutes * 60
    warmup_s = duration * args.warmup_fraction
    t0 = time.time()
    start = sample(url, pid, t0)
    load = Load(Client(url, timeout=300), model_name, args.seed, args.concurrency)
    for t in load.threads:
        t.start()
    samples = [start]
    while time.time() - t0 < duration:
        time.sleep(min(args.sample_seconds, max(0.0, duration - (time.time() - t0))))
        samples.append(sample(url, pid, t0))
        s = samples[-1]
        print(f"{s['t'] / 60:6.1f} min  rss {s['rss_mib']:7.1f} MiB  fds {s['fds']:4d}  "
              f"kv used {s['kv_pages_used']:5.0f} cached {s['kv_pages_cached']:5.0f}  "
              f"running {s['running']:3.0f} waiting {s['waiting']:3.0f}", flush=True)
    load.stop.set()
    for t in load.threads:
        t.join(600)
    deadline = time.time() + 60  # abandoned streams are cancelled at the next step
    while True:
        end = sample(url, pid, t0)
        if (end["running"] == 0 and end["waiting"] == 0) or time.time() > deadline:
            break
        time.sleep(0.5)
    samples.append(end)
    verdicts = judge(samples, end, start, load, warmup_s)
    for ok, text in verdicts:
        print(("PASS " if ok else "FAIL ") + text)
    print("actions:", json.dumps(load.counts, sort_keys=True))
    draw(samples, warmup_s, args.png)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"samples": samples, "counts": load.counts,
                       "failures": load.failures[:100],
                       "verdicts": [{"ok": ok, "text": text} for ok, text in verdicts]}, f,
                      indent=1)
    sys.exit(0 if all(ok for ok, _ in verdicts) else 1)


if __name__ == "__main__":
    main()
