#!/usr/bin/env python3
"""The "online" workload of shared/design/BENCHMARKS.md: requests arriving as a Poisson process
against drift serve and llama.cpp's llama-server — same model, same parallel slots, same
threads, the same seeded requests at the same offsets — in the same run, alternating systems per
round. Every request streams; TTFT is from sending to the first text chunk, inter-token latency
(ITL) every gap between text chunks of one stream, throughput the generated tokens over the span
from the first send to the last token.

  bench/load_gen.py --llama-bin $LLAMA_CPP_BIN [-m MODEL] [--rate 2] [--requests 48]
                    [--parallel 16] [--ctx 1024] [--gen 64] [--rounds 3] [--json out.json]
  bench/load_gen.py --kv-events ...   # drift with --kv-events-endpoint vs drift without

With --kv-events the two systems are drift publishing its KV events (to a subscriber of this
script that receives and counts every message, as a router would) and drift without them.

Each server gets `--parallel` slots of `--ctx` tokens (llama-server: -np P -c P*ctx; drift:
--parallel P --ctx-size ctx and a KV cache of the same P*ctx tokens). Prints a table with medians
(min-max) over rounds and drift's ratios, and JSON.
"""
import argparse
import concurrent.futures
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (DRIFT, cpu_model, default_model, drift_commit, fmt_summary,  # noqa: E402
                          percentile, summary)
from http_client import ServerProcess, stream_completion  # noqa: E402
from offline import WORDS  # noqa: E402

# SmolLM2-135M's KV bytes per token at f16 (30 layers x 3 KV heads x 64 x K,V x 2 bytes); drift
# gets as many tokens of KV as llama-server's -c, from this.
KV_BYTES_PER_TOKEN = 30 * 3 * 64 * 2 * 2


def make_workload(args):
    """The same requests and arrival offsets for every system: Poisson arrivals at `rate`."""
    rng = random.Random(args.seed)
    t, requests = 0.0, []
    for _ in range(args.requests):
        t += rng.expovariate(args.rate)
        n = rng.randint(args.min_prompt, args.max_prompt)
        prompt = " ".join(rng.choice(WORDS) for _ in range(n))
        requests.append((t, {"prompt": prompt, "max_tokens": args.gen, "temperature": 0,
                             "ignore_eos": True}))
    return requests


def run_load(url, workload):
    """Sends each request at its offset (one thread per request in flight) and collects results."""
    results = [None] * len(workload)
    start = time.perf_counter() + 0.2

    def one(i):
        offset, body = workload[i]
        delay = start + offset - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        results[i] = stream_completion(url, body)

    with concurrent.futures.ThreadPoolExecutor(len(workload)) as pool:
        list(pool.map(one, range(len(workload))))
    failed = [r.error for r in results if r.error or not r.token_times]
    if failed:
        raise RuntimeError(f"{len(failed)} requests failed, e.g. {failed[0]}")
    first_send = min(r.start for r in results)
    last_token = max(r.token_times[-1] for r in results)
    tokens = sum((r.usage or {}).get("completion_tokens") or len(r.token_times) for r in results)
    ttfts = [r.ttft for r in results]
    gaps = [g for r in results for g in r.inter_token_gaps()]
    return {"throughput_tps": tokens / (last_token - first_send), "tokens": tokens,
            "ttft_p50_ms": 1e3 * percentile(ttfts, 50), "ttft_p99_ms": 1e3 * percentile(ttfts, 99),
            "itl_p50_ms": 1e3 * percentile(gaps, 50), "itl_p99_ms": 1e3 * percentile(gaps, 99)}


class EventSubscriber:
    """A router's end of the KV event stream: binds a SUB socket and receives on a thread."""

    def __init__(self):
        import zmq  # the venv's pyzmq (scripts/setup_venv.sh); only this mode needs it
        self.messages = 0
        self._stop = threading.Event()
        ctx = zmq.Context.instance()
        self._sock = ctx.socket(zmq.SUB)
        self._sock.setsockopt(zmq.SUBSCRIBE, b"")
        self.port = self._sock.bind_to_random_port("tcp://127.0.0.1")
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            if self._sock.poll(50):
                self._sock.recv_multipart()
                self.messages += 1

    def close(self):
        self._stop.set()
        self._thread.join()
        self._sock.close(linger=0)


def servers(args, subscriber=None):
    kv_mib = args.parallel * args.ctx * KV_BYTES_PER_TOKEN / (1 << 20)
    drift_args = ["--parallel", str(args.parallel), "--ctx-size", str(args.ctx), "--kv-mib",
                  f"{kv_mib:.1f}", "--threads", str(args.threads), "--max-queued", "4096",
                  "--log-level", "warn"]
    drift = lambda: ServerProcess.drift(args.model, drift_args, drift=args.drift)  # noqa: E731
    if subscriber is not None:
        events = ["--kv-events-endpoint", f"tcp://127.0.0.1:{subscriber.port}"]
        with_events = lambda: ServerProcess.drift(  # noqa: E731
            args.model, drift_args + events, drift=args.drift)
        return {"drift+kv-events": with_events, "drift": drift}
    llama = lambda: ServerProcess.llama(  # noqa: E731
        args.llama_bin, args.model, ["-np", str(args.parallel), "-c", str(args.parallel * args.ctx),
                                     "-t", str(args.threads), "--log-disable"])
    return {"drift": drift, "llama.cpp": llama}


METRICS = [("throughput_tps", "throughput (tokens/s)", True), ("ttft_p50_ms", "TTFT p50 (ms)", False),
           ("ttft_p99_ms", "TTFT p99 (ms)", False), ("itl_p50_ms", "ITL p50 (ms)", False),
           ("itl_p99_ms", "ITL p99 (ms)", False)]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--drift", default=DRIFT)
    p.add_argument("--llama-bin", default=os.environ.get("LLAMA_CPP_BIN"),
                   help="directory of llama-server (default: $LLAMA_CPP_BIN)")
    p.add_argument("-m", "--model", default=default_model())
    p.add_argument("--rate", type=float, default=2.0, help="mean arrivals per second")
    p.add_argument("--requests", type=int, default=48)
    p.add_argument("--min-prompt", type=int, default=32, help="prompt words, at least")
    p.add_argument("--max-prompt", type=int, default=256, help="prompt words, at most")
    p.add_argument("--gen", type=int, default=64, help="tokens generated per request")
    p.add_argument("--parallel", type=int, default=16)
    p.add_argument("--ctx", type=int, default=1024, help="context per slot")
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--kv-events", action="store_true",
                   help="compare drift with --kv-events-endpoint against drift without")
    args = p.parse_args()
    if not args.llama_bin and not args.kv_events:
        p.error("--llama-bin or LLAMA_CPP_BIN is required (the directory holding llama-server)")

    workload = make_workload(args)
    subscriber = EventSubscriber() if args.kv_events else None
    factories = servers(args, subscriber)
    runs = {name: [] for name in factories}
    for rnd in range(args.rounds):
        order = list(factories) if rnd % 2 == 0 else list(reversed(factories))
        for name in order:
            with factories[name]() as server:
                stream_completion(server.url, {"prompt": "warm up", "max_tokens": 4})
                r = run_load(server.url, workload)
            runs[name].append(r)
            print(f"round {rnd + 1} {name:9s} " + "  ".join(f"{k}={v:.1f}" for k, v in r.items()),
                  file=sys.stderr)

    first, second = list(factories)
    ratio_key = ("ratios_drift_over_llama" if second == "llama.cpp"
                 else "ratios_kv_events_over_none")
    result = {"workload": {k: getattr(args, k) for k in ("rate", "requests", "min_prompt",
                                                         "max_prompt", "gen", "parallel", "ctx",
                                                         "threads", "rounds", "seed")},
              "model": os.path.basename(args.model), "drift_commit": drift_commit(),
              "cpu": cpu_model(), "systems": {}, ratio_key: {}}
    for name, rs in runs.items():
        result["systems"][name] = {k: summary([r[k] for r in rs]) for k, _, _ in METRICS}
    if subscriber is not None:
        subscriber.close()
        result["kv_event_messages_received"] = subscriber.messages
    print(f"\nonline workload: {args.requests} requests, Poisson {args.rate}/s, prompts "
          f"{args.min_prompt}-{args.max_prompt} words, {args.gen} generated, {args.parallel} slots, "
          f"{args.threads} threads, {args.rounds} rounds; median (min-max)")
    print(f"{'':24s}{first:>28s}{second:>28s}{first + '/' + second:>24s}")
    for key, label, _ in METRICS:
        d, l = result["systems"][first][key], result["systems"][second][key]
        ratio = d["median"] / l["median"] if l["median"] else float("nan")
        result[ratio_key][key] = ratio
        print(f"{label:24s}{fmt_summary(d):>28s}{fmt_summary(l):>28s}{ratio:>24.2f}")
    if subscriber is not None:
        print(f"KV event messages received: {subscriber.messages}")
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
