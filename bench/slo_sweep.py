#!/usr/bin/env python3
"""Goodput against load: Poisson arrivals at rising rates against drift serve and llama.cpp's
llama-server (same model, slots, threads, and the same seeded requests at each rate), reporting
per rate the throughput, TTFT p50/p99, ITL p50/p99 and goodput — requests per second that met
the service-level objective (TTFT <= --slo-ttft-s and their own ITL p99 <= --slo-itl-ms; a
refused or failed request never does) — and drawing goodput against rate as a PNG.

  bench/slo_sweep.py --llama-bin $LLAMA_CPP_BIN [--rates 0.25,0.5,1,2] [--duration 60]
                     [--min-prompt 20] [--max-prompt 1000] [--min-gen 32] [--max-gen 128]
                     [--parallel 16] [--png slo_sweep.png] [--json out.json]
                     [--drift-args "--target-itl-ms 100 --max-ttft-s 5"]

Every request streams; TTFT is from sending to the first text chunk, ITL each gap between text
chunks of one stream. Each rate runs for --duration seconds of arrivals (rate x duration
requests), on a fresh server, --rounds times (default 1; systems alternate), and reports the
median of each figure; the knee is the rate of highest goodput. The PNG needs Debian's
python3-matplotlib: run the script with /usr/bin/python3 when another python3 comes first on the
PATH (without matplotlib the PNG is skipped with a note).
"""
import argparse
import concurrent.futures
import json
import os
import random
import shlex
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import add_common_args, cpu_model, drift_commit, percentile  # noqa: E402
from http_client import ServerProcess, stream_completion  # noqa: E402
from load_gen import KV_BYTES_PER_TOKEN  # noqa: E402
from offline import WORDS  # noqa: E402


def make_workload(rate, duration, args):
    """Poisson arrivals at `rate` for `duration` seconds; prompts and lengths seeded per rate, so
    both systems get the same requests at the same offsets."""
    rng = random.Random(f"{args.seed}/{rate}")
    t, requests = 0.0, []
    while True:
        t += rng.expovariate(rate)
        if t > duration:
            break
        words = rng.randint(args.min_prompt, args.max_prompt)
        prompt = " ".join(rng.choice(WORDS) for _ in range(words))
        requests.append((t, {"prompt": prompt, "max_tokens": rng.randint(args.min_gen, args.max_gen),
                             "temperature": 0, "ignore_eos": True}))
    return requests


def run_rate(url, workload, args):
    results = [None] * len(workload)
    start = time.perf_counter() + 0.2

    def one(i):
        offset, body = workload[i]
        delay = start + offset - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        results[i] = stream_completion(url, body)

    with concurrent.futures.ThreadPoolExecutor(max(1, len(workload))) as pool:
        list(pool.map(one, range(len(workload))))
    served = [r for r in results if not r.error and r.token_times]
    refused = sum(1 for r in results if r.error and r.error.startswith("HTTP 429"))
    failed = len(results) - len(served) - refused
    end = max((r.token_times[-1] for r in served), default=start)
    span = max(end - min(r.start for r in results), 1e-9)
    ttfts = [r.ttft for r in served]
    gaps = [g for r in served for g in r.inter_token_gaps()]

    def good(r):
        own_gaps = r.inter_token_gaps()
        itl_p99 = percentile(own_gaps, 99) if own_gaps else 0.0
        return r.ttft <= args.slo_ttft_s and itl_p99 * 1e3 <= args.slo_itl_ms

    tokens = sum((r.usage or {}).get("completion_tokens") or len(r.token_times) for r in served)
    return {"requests": len(results), "served": len(served), "refused_429": refused,
            "failed": failed, "throughput_tps": tokens / span,
            "ttft_p50_ms": 1e3 * percentile(ttfts, 50), "ttft_p99_ms": 1e3 * percentile(ttfts, 99),
            "itl_p50_ms": 1e3 * percentile(gaps, 50), "itl_p99_ms": 1e3 * percentile(gaps, 99),
            "goodput_rps": sum(1 for r in served if good(r)) / span,
            "good": sum(1 for r in served if good(r))}


def servers(args):
    kv_mib = args.parallel * args.ctx * KV_BYTES_PER_TOKEN / (1 << 20)
    factories = {
        "drift": lambda: ServerProcess.drift(args.model, [
            "--parallel", str(args.parallel), "--ctx-size", str(args.ctx), "--kv-mib",
            f"{kv_mib:.1f}", "--threads", str(args.threads), "--max-queued", "4096",
            "--log-level", "warn", *shlex.split(args.drift_args)], drift=args.drift)}
    if args.llama_bin:
        factories["llama.cpp"] = lambda: ServerProcess.llama(args.llama_bin, args.model, [
            "-np", str(args.parallel), "-c", str(args.parallel * args.ctx), "-t", str(args.threads),
            "--log-disable"])
    return factories


def plot(result, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no PNG: matplotlib is missing (Debian: python3-matplotlib)", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, per_rate in result["systems"].items():
        rates = sorted(per_rate, key=float)
        ax.plot([float(r) for r in rates], [per_rate[r]["goodput_rps"] for r in rates], marker="o",
                label=name)
    rates = sorted({float(r) for per in result["systems"].values() for r in per})
    ax.plot(rates, rates, linestyle=":", color="grey", label="offered load")
    ax.set_xlabel("arrival rate (requests/s)")
    ax.set_ylabel("goodput (requests/s meeting the SLO)")
    slo = result["slo"]
    ax.set_title(f"TTFT <= {slo['ttft_s']} s and ITL p99 <= {slo['itl_ms']} ms")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}", file=sys.stderr)


COLUMNS = [("throughput_tps", "tok/s", 1), ("ttft_p50_ms", "TTFT p50", 0), ("ttft_p99_ms", "TTFT p99", 0),
           ("itl_p50_ms", "ITL p50", 0), ("itl_p99_ms", "ITL p99", 0), ("goodput_rps", "goodput", 3),
           ("refused_429", "429s", 0)]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(p)
    p.add_argument("--rates", default="0.25,0.5,1,2", help="arrivals per second, comma-separated")
    p.add_argument("--duration", type=float, default=60, help="seconds of arrivals per rate")
    p.add_argument("--min-prompt", type=int, default=20, help="prompt words, at least")
    p.add_argument("--max-prompt", type=int, default=1000, help="prompt words, at most")
    p.add_argument("--min-gen", type=int, default=32)
    p.add_argument("--max-gen", type=int, default=128)
    p.add_argument("--parallel", type=int, default=16)
    p.add_argument("--ctx", type=int, default=2048, help="context per slot")
    p.add_argument("--slo-ttft-s", type=float, default=2.0)
    p.add_argument("--slo-itl-ms", type=float, default=150.0)
    p.add_argument("--drift-args", default="", help="extra drift serve flags")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--png", default="slo_sweep.png")
    p.add_argument("--json", help="also write the results here")
    p.set_defaults(rounds=1)
    args = p.parse_args()
    rates = [float(r) for r in args.rates.split(",")]

    factories = servers(args)
    if "llama.cpp" not in factories:
        print("no --llama-bin / LLAMA_CPP_BIN: drift only", file=sys.stderr)
    result = {"slo": {"ttft_s": args.slo_ttft_s, "itl_ms": args.slo_itl_ms},
              "workload": {k: getattr(args, k) for k in ("duration", "min_prompt", "max_prompt",
                                                         "min_gen", "max_gen", "parallel", "ctx",
                                                         "threads", "seed", "drift_args")},
              "model": os.path.basename(args.model), "drift_commit": drift_commit(),
              "cpu": cpu_model(), "systems": {name: {} for name in factories}}
    turn = 0
    for rate in rates:
        workload = make_workload(rate, args.duration, args)
        runs = {name: [] for name in factories}
        for _ in range(args.rounds):
            names = list(factories) if turn % 2 == 0 else list(reversed(factories))
            turn += 1
            for name in names:
                with factories[name]() as server:
                    stream_completion(server.url, {"prompt": "warm up", "max_tokens": 4})
                    r = run_rate(server.url, workload, args)
                runs[name].append(r)
                print(f"rate {rate}/s {name:9s} " + "  ".join(f"{k}={v:.3g}" for k, v in r.items()),
                      file=sys.stderr)
        for name, rs in runs.items():
            result["systems"][name][str(rate)] = {k: statistics.median(r[k] for r in rs)
                                                  for k in rs[0]}

    print(f"\nSLO sweep: Poisson arrivals for {args.duration:g} s per rate, prompts "
          f"{args.min_prompt}-{args.max_prompt} words, {args.min_gen}-{args.max_gen} generated, "
          f"{args.parallel} slots, {args.threads} threads; goodput = requests/s with TTFT <= "
          f"{args.slo_ttft_s:g} s and ITL p99 <= {args.slo_itl_ms:g} ms; times in ms")
    print(f"{'rate':>6s} {'system':10s}" + "".join(f"{label:>10s}" for _, label, _ in COLUMNS))
    for rate in rates:
        for name in factories:
            r = result["systems"][name][str(rate)]
            print(f"{rate:>6g} {name:10s}" +
                  "".join(f"{r[key]:>10.{digits}f}" for key, _, digits in COLUMNS))
    for name, per_rate in result["systems"].items():
        knee = max(per_rate, key=lambda k: per_rate[k]["goodput_rps"])
        result.setdefault("knee", {})[name] = {"rate": float(knee),
                                               "goodput_rps": per_rate[knee]["goodput_rps"]}
        print(f"knee {name}: {per_rate[knee]['goodput_rps']:.3f} requests/s at {knee}/s")
    plot(result, args.png)
    print(json.dumps(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
