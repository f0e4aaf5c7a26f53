#!/usr/bin/env python3
"""Sliding-window KV groups: how many long sequences of a model with sliding-window layers
(Gemma 3) run at once in a fixed KV budget, with its sliding layers freeing pages (the default)
and with every layer kept in one page (`--no-hybrid-kv`, the layout before KV groups).

  bench/sliding_window_kv.py [--model gemma-3-270m-q4_k_m.gguf] [--requests 12]
      [--prompt-tokens 4000] [--max-tokens 96] [--kv-mib 288]
      [--configs 512:one,512:groups,2048:groups] [--json out.json]

For each configuration B:L — B the step's token budget (--batch-tokens: the most tokens a
prefill chunk adds, which a sliding group holds beside its window), L the layout (`groups`, the
default, or `one`, --no-hybrid-kv: every layer in one page, the layout before KV groups, whose
capacity does not depend on B) — a fresh `drift serve --kv-mib M --batch-tokens B
--target-itl-ms 0 --idle-step-ms 0 [--no-hybrid-kv]` with guaranteed admission and no prefix
cache, then all requests at once: distinct random token-id prompts of --prompt-tokens, greedy,
ignore_eos, --max-tokens each. --target-itl-ms 0 and --idle-step-ms 0 give prefill the whole step
budget whether others decode or not, so that admissions reach what the KV cache allows within the
first requests' decodes. Reports the
KV pages (/metrics), the most requests running at once (vllm:num_requests_running, sampled every
0.1 s), completions and wall time.
"""
import argparse
import concurrent.futures
import json
import os
import random
import re
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import DRIFT, cpu_model, drift_commit  # noqa: E402
from http_client import ServerProcess, stream_completion  # noqa: E402


def gauge(text, name):
    m = re.search(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? ([0-9.e+]+)", text, re.M)
    return float(m.group(1)) if m else None


def run_once(args, batch_tokens, hybrid):
    extra = ["--kv-mib", str(args.kv_mib), "--parallel", str(args.requests), "--batch-tokens",
             str(batch_tokens), "--max-queued", str(args.requests * 2), "--threads",
             str(args.threads), "--no-prefix-cache", "--admission", "guaranteed",
             "--target-itl-ms", "0", "--idle-step-ms", "0"]
    if not hybrid:
        extra.append("--no-hybrid-kv")
    rng = random.Random(7)
    # Distinct random ids well inside the vocabulary, so that no prompt shares another's KV.
    prompts = [[rng.randrange(1000, 200000) for _ in range(args.prompt_tokens)]
               for _ in range(args.requests)]
    with ServerProcess.drift(args.model, extra, drift=args.drift) as server:
        metrics = urllib.request.urlopen(server.url + "/metrics", timeout=5).read().decode()
        pages = gauge(metrics, "drift:kv_pages_total")
        running, stop = [], threading.Event()

        def sample():
            while not stop.is_set():
                try:
                    text = urllib.request.urlopen(server.url + "/metrics", timeout=5).read().decode()
                    value = gauge(text, "vllm:num_requests_running")
                    if value is not None:
                        running.append(value)
                except OSError:
                    pass
                time.sleep(0.1)

        sampler = threading.Thread(target=sample)
        sampler.start()
        start = time.perf_counter()
        body = lambda p: {"prompt": p, "max_tokens": args.max_tokens, "temperature": 0,
                          "ignore_eos": True, "stream": True,
                          "stream_options": {"include_usage": True}}
        with concurrent.futures.ThreadPoolExecutor(args.requests) as pool:
            results = list(pool.map(lambda p: stream_completion(server.url, body(p)), prompts))
        wall = time.perf_counter() - start
        stop.set()
        sampler.join()
    done = [r for r in results if r.error is None and r.usage]
    return {"batch_tokens": batch_tokens, "hybrid": hybrid, "kv_pages": pages,
            "completed": len(done), "failed": len(results) - len(done),
            "errors": sorted({str(r.error) for r in results if r.error is not None})[:3],
            "wall_s": wall, "max_running": max(running, default=0)}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--drift", default=DRIFT)
    cache = os.environ.get("DRIFT_CACHE", os.path.expanduser("~/.cache/drift"))
    p.add_argument("--model", default=os.path.join(cache, "gemma-3-270m-q4_k_m.gguf"))
    p.add_argument("--requests", type=int, default=12)
    p.add_argument("--prompt-tokens", type=int, default=4000)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--kv-mib", type=float, default=288)
    p.add_argument("--configs", default="512:one,512:groups,2048:groups")
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("--json")
    args = p.parse_args()
    rows = []
    for config in args.configs.split(","):
        batch, layout = config.split(":")
        if layout not in ("one", "groups"):
            p.error(f"layout must be one or groups, got {layout}")
        r = run_once(args, int(batch), layout == "groups")
        print(f"{r}", file=sys.stderr)
        rows.append(r)
    print(f"{args.requests} requests of {args.prompt_tokens} + {args.max_tokens} tokens, "
          f"--kv-mib {args.kv_mib:g}, {os.path.basename(args.model)}, {cpu_model()}, "
          f"drift {drift_commit()}")
    print("| --batch-tokens | layout | KV pages | completed | wall s | most running at once |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        layout = "KV groups (default)" if r["hybrid"] else "one group (--no-hybrid-kv)"
        print(f"| {r['batch_tokens']} | {layout} | {r['kv_pages']:.0f} | "
              f"{r['completed']}/{r['completed'] + r['failed']} | {r['wall_s']:.0f} | "
              f"{r['max_running']:.0f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
