#!/usr/bin/env python3
"""The "shared-prefix" and "multi-turn" workloads of shared/design/BENCHMARKS.md over HTTP:
drift serve with its prefix cache on, with it off, and llama.cpp's llama-server with its prompt
cache, in the same run, each on a fresh server with the same parallelism.

  shared-prefix  32 requests = one ~1,024-token system prompt + a distinct ~32-token question,
                 16 generated each, all sent at once (or --clients at a time, each client
                 sending its next request when its last one finishes): TTFT p50/p99, total time.
  multi-turn     8 conversations x 6 turns run concurrently; each turn sends the history plus
                 ~64 new tokens and generates 64: TTFT p50/p99 of turns 2-6.

Systems alternate per round (--rounds); the table gives medians (min-max) and drift's ratios.

  bench/prefix_reuse.py --llama-bin $LLAMA_CPP_BIN [-m MODEL] [--rounds 3] [--parallel 16]
"""
import argparse
import concurrent.futures
import functools
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (cpu_model, default_model, drift_commit, fmt_summary,  # noqa: E402
                          percentile, summary)
from http_client import ServerProcess, stream_completion  # noqa: E402
from offline import WORDS  # noqa: E402


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def check(result):
    if result.error or not result.token_times:
        raise RuntimeError(f"request failed: {result.error or 'no tokens'}")
    return result


def shared_prefix(url, seed, clients=None, n_requests=32, system_words=1024, question_words=32,
                  gen=16):
    """clients: requests in flight at once, each client sending its next one when the last
    finishes (None: all at once)."""
    rng = random.Random(seed)
    system = "System: " + words(rng, system_words) + "\n"
    prompts = [system + "Question: " + words(rng, question_words) + "\nAnswer:"
               for _ in range(n_requests)]
    body = {"max_tokens": gen, "temperature": 0, "ignore_eos": True}
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients or n_requests) as pool:
        results = list(pool.map(lambda p: check(stream_completion(url, dict(body, prompt=p))),
                                prompts))
    total = time.perf_counter() - start
    ttfts = [r.ttft for r in results]
    return {"ttft_p50_ms": 1e3 * percentile(ttfts, 50), "ttft_p99_ms": 1e3 * percentile(ttfts, 99),
            "total_s": total}


def multi_turn(url, seed, conversations=8, turns=6, turn_words=64, gen=64):
    def conversation(index):
        rng = random.Random(seed * 100 + index)
        history, ttfts = "", []
        for turn in range(turns):
            history += f"User: {words(rng, turn_words)}\nAssistant:"
            r = check(stream_completion(url, {"prompt": history, "max_tokens": gen,
                                              "temperature": 0, "ignore_eos": True}))
            history += r.text + "\n"
            if turn > 0:
                ttfts.append(r.ttft)
        return ttfts

    with concurrent.futures.ThreadPoolExecutor(conversations) as pool:
        ttfts = [t for ts in pool.map(conversation, range(conversations)) for t in ts]
    return {"ttft_p50_ms": 1e3 * percentile(ttfts, 50), "ttft_p99_ms": 1e3 * percentile(ttfts, 99)}


def warm_up(url):
    check(stream_completion(url, {"prompt": "Warm-up: " + "hello " * 64, "max_tokens": 4}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-bin", default=os.environ.get("LLAMA_CPP_BIN"))
    parser.add_argument("-m", "--model", default=default_model())
    parser.add_argument("--parallel", type=int, default=16)
    parser.add_argument("--ctx", type=int, default=2048, help="context per sequence")
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", default="shared-prefix,multi-turn")
    parser.add_argument("--clients", type=int, default=None,
                        help="shared-prefix: requests in flight at once (default: all 32)")
    args = parser.parse_args()

    drift_args = ["--parallel", str(args.parallel), "-c", str(args.ctx), "-t", str(args.threads)]
    systems = {
        "drift cache on": lambda: ServerProcess.drift(args.model, drift_args),
        "drift cache off": lambda: ServerProcess.drift(args.model,
                                                       drift_args + ["--no-prefix-cache"]),
    }
    if args.llama_bin:
        systems["llama-server"] = lambda: ServerProcess.llama(
            args.llama_bin, args.model,
            ["-np", str(args.parallel), "-c", str(args.parallel * args.ctx), "-t",
             str(args.threads)])
    else:
        print("no --llama-bin / LLAMA_CPP_BIN: llama-server left out", file=sys.stderr)
    workloads = {"shared-prefix": functools.partial(shared_prefix, clients=args.clients),
                 "multi-turn": multi_turn}
    chosen = args.workloads.split(",")

    runs = {(w, s): [] for w in chosen for s in systems}
    for r in range(args.rounds):
        for name, make in systems.items():
            with make() as server:
                warm_up(server.url)
                for w in chosen:
                    runs[(w, name)].append(workloads[w](server.url, seed=r + 1))
                    print(f"round {r + 1} {name} {w}: {runs[(w, name)][-1]}", file=sys.stderr)

    result = {"model": os.path.basename(args.model), "parallel": args.parallel,
              "threads": args.threads, "drift_commit": drift_commit(), "cpu": cpu_model(),
              "rounds": args.rounds, "workloads": {}}
    for w in chosen:
        keys = list(runs[(w, next(iter(systems)))][0].keys())
        print(f"\n{w}\n| system | " + " | ".join(keys) + " |")
        print("| --- |" + " ---: |" * len(keys))
        result["workloads"][w] = {}
        for name in systems:
            s = {k: summary([x[k] for x in runs[(w, name)]]) for k in keys}
            result["workloads"][w][name] = s
            print(f"| {name} | " + " | ".join(fmt_summary(s[k]) for k in keys) + " |")
        on = result["workloads"][w]["drift cache on"]
        for other in [n for n in systems if n != "drift cache on"]:
            ratios = {k: result["workloads"][w][other][k]["median"] / on[k]["median"] for k in keys}
            result["workloads"][w][f"ratio {other} / drift cache on"] = ratios
            print(f"| {other} / drift cache on | " +
                  " | ".join(f"{ratios[k]:.2f}x" for k in keys) + " |")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
