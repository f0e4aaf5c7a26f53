#!/usr/bin/env python3
"""The "single" workload of shared/design/BENCHMARKS.md: drift bench next to llama-bench.

Runs `drift bench` and llama.cpp's `llama-bench` on the same GGUF with the same thread count,
prompt and generation lengths, alternating A B A B ... for --rounds rounds, and prints the median
(min-max) tokens/s of each and their ratio, as a table and as JSON.

  bench/compare_single.py --llama-bin $LLAMA_CPP_BIN [-m MODEL] [--rounds 3] [-p 512] [-n 128]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import add_common_args, cpu_model, drift_commit, summary  # noqa: E402


def run_drift(args):
    out = subprocess.run([args.drift, "bench", "-m", args.model, "-p", str(args.p), "-n", str(args.n),
                          "-r", "1", "-t", str(args.threads)], check=True, capture_output=True,
                         text=True).stdout
    record = json.loads(out.strip().splitlines()[-1])
    rates = {t["test"][:2]: t["tokens_per_second"] for t in record["tests"]}
    return rates, record


def run_llama(args):
    exe = os.path.join(args.llama_bin, "llama-bench")
    out = subprocess.run([exe, "-m", args.model, "-p", str(args.p), "-n", str(args.n), "-r", "1",
                          "-t", str(args.threads), "-o", "json"], check=True, capture_output=True,
                         text=True).stdout
    rates, build = {}, None
    for test in json.loads(out):
        kind = "pp" if test["n_prompt"] > 0 and test["n_gen"] == 0 else "tg"
        rates[kind] = test["avg_ts"]
        build = f'{test.get("build_commit")} (build {test.get("build_number")})'
    return rates, build


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    parser.add_argument("-p", type=int, default=512)
    parser.add_argument("-n", type=int, default=128)
    args = parser.parse_args()
    if not args.llama_bin:
        sys.exit("give the llama.cpp build directory with --llama-bin or LLAMA_CPP_BIN")

    drift = {"pp": [], "tg": []}
    llama = {"pp": [], "tg": []}
    record = build = None
    for r in range(args.rounds):
        rates, record = run_drift(args)
        for k in drift:
            drift[k].append(rates[k])
        rates, build = run_llama(args)
        for k in llama:
            llama[k].append(rates[k])
        print(f"round {r + 1}: drift pp {drift['pp'][-1]:.1f} tg {drift['tg'][-1]:.1f} | "
              f"llama.cpp pp {llama['pp'][-1]:.1f} tg {llama['tg'][-1]:.1f}", file=sys.stderr)

    commit = drift_commit()
    result = {
        "workload": "single", "model": os.path.basename(args.model), "threads": args.threads,
        "drift_commit": commit, "llama_cpp": build, "cpu": cpu_model(),
        "drift_isa": record["isa"],
        "bandwidth_gb_per_s": record["bandwidth_bytes_per_second"] / 1e9,
        "decode_roofline_tokens_per_s": record["decode_roofline_tokens_per_second"],
        "rounds": args.rounds,
    }
    print(f"| test | drift t/s | llama.cpp t/s | drift / llama.cpp |")
    print(f"| --- | ---: | ---: | ---: |")
    for kind, n in (("pp", args.p), ("tg", args.n)):
        d, l = summary(drift[kind]), summary(llama[kind])
        ratio = d["median"] / l["median"]
        result[f"{kind}{n}"] = {"drift": d, "llama_cpp": l, "ratio": ratio}
        print(f"| {kind}{n} | {d['median']:.1f} ({d['min']:.1f}-{d['max']:.1f}) | "
              f"{l['median']:.1f} ({l['min']:.1f}-{l['max']:.1f}) | {ratio:.2f} |")
    print(f"memory read bandwidth {result['bandwidth_gb_per_s']:.1f} GB/s; decode ceiling "
          f"{result['decode_roofline_tokens_per_s']:.0f} t/s; llama.cpp {build}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
