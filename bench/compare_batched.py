#!/usr/bin/env python3
"""The "batched" workload of shared/design/BENCHMARKS.md: drift batched-bench next to
llama.cpp's llama-batched-bench.

For each N in --npl, N sequences of --npp prompt tokens generate --ntg tokens each. The two
programs alternate (A B A B ...) for --rounds rounds; the script prints, per N, the median
(min-max) aggregate decode t/s (S_TG) and prompt t/s (S_PP) of each, their ratios, and drift's
S_TG at each N relative to its own single-stream S_TG; then one JSON line.

  bench/compare_batched.py --llama-bin $LLAMA_CPP_BIN [-m MODEL] [--rounds 3] [--npl 1,2,4,8,16]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import add_common_args, cpu_model, drift_commit, fmt_summary, summary  # noqa: E402


def jsonl(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def run_drift(args):
    out = subprocess.run([args.drift, "batched-bench", "-m", args.model, "--npp", str(args.npp),
                          "--ntg", str(args.ntg), "--npl", args.npl, "-t", str(args.threads)],
                         check=True, capture_output=True, text=True).stdout
    return {r["pl"]: r for r in jsonl(out)}


def run_llama(args, levels):
    exe = os.path.join(args.llama_bin, "llama-batched-bench")
    ctx = max(levels) * (args.npp + args.ntg)
    out = subprocess.run([exe, "-m", args.model, "-c", str(ctx), "-npp", str(args.npp),
                          "-ntg", str(args.ntg), "-npl", args.npl, "-t", str(args.threads),
                          "--output-format", "jsonl"],
                         check=True, capture_output=True, text=True).stdout
    return {r["pl"]: r for r in jsonl(out)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    parser.add_argument("--npp", type=int, default=128)
    parser.add_argument("--ntg", type=int, default=128)
    parser.add_argument("--npl", default="1,2,4,8,16,32,64")
    args = parser.parse_args()
    if not args.llama_bin:
        sys.exit("give the llama.cpp build directory with --llama-bin or LLAMA_CPP_BIN")
    levels = [int(x) for x in args.npl.split(",")]

    drift = {n: {"tg": [], "pp": []} for n in levels}
    llama = {n: {"tg": [], "pp": []} for n in levels}
    for r in range(args.rounds):
        for results, runs in ((run_drift(args), drift), (run_llama(args, levels), llama)):
            for n in levels:
                runs[n]["tg"].append(results[n]["speed_tg"])
                runs[n]["pp"].append(results[n]["speed_pp"])
        print(f"round {r + 1}: " + " ".join(
            f"N={n} drift {drift[n]['tg'][-1]:.0f} / llama {llama[n]['tg'][-1]:.0f}"
            for n in levels), file=sys.stderr)

    result = {"workload": "batched", "model": os.path.basename(args.model),
              "threads": args.threads, "npp": args.npp, "ntg": args.ntg,
              "drift_commit": drift_commit(), "cpu": cpu_model(), "rounds": args.rounds,
              "levels": {}}
    single = summary(drift[levels[0]]["tg"])["median"]
    print("| N | drift S_TG t/s | llama.cpp S_TG t/s | ratio | drift S_PP t/s | "
          "llama.cpp S_PP t/s | ratio | drift S_TG / N=" f"{levels[0]} |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in levels:
        dt, lt = summary(drift[n]["tg"]), summary(llama[n]["tg"])
        dp, lp = summary(drift[n]["pp"]), summary(llama[n]["pp"])
        entry = {"drift_tg": dt, "llama_tg": lt, "tg_ratio": dt["median"] / lt["median"],
                 "drift_pp": dp, "llama_pp": lp, "pp_ratio": dp["median"] / lp["median"],
                 "drift_tg_scaling": dt["median"] / single}
        result["levels"][n] = entry
        print(f"| {n} | {fmt_summary(dt)} | {fmt_summary(lt)} | {entry['tg_ratio']:.2f} | "
              f"{fmt_summary(dp)} | {fmt_summary(lp)} | {entry['pp_ratio']:.2f} | "
              f"{entry['drift_tg_scaling']:.2f} |")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
