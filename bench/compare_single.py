#!/usr/bin/env python3
"""The "single" workload of shared/design/BENCHMARKS.md: drift bench next to llama-bench.

Runs `drift bench` and the `llama-bench` of each reference given (llama.cpp, ik_llama.cpp) on
the same GGUF with the same thread count, prompt and generation lengths, alternating
drift, llama.cpp, ik_llama.cpp, drift, ... for --rounds rounds, and prints the median (min-max)
tokens/s of each and drift's ratio to each, as a table and as JSON. --isa forces drift's
kernels (compare DRIFT_ISA=avx2 with references built for AVX2 only).

  bench/compare_single.py --llama-bin $LLAMA_CPP_BIN [--ik-llama-bin $IK_LLAMA_BIN]
                          [-m MODEL] [--rounds 3] [-p 512] [-n 128] [--isa avx2]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (add_common_args, add_reference_args, cpu_model, drift_commit,  # noqa: E402
                          drift_env, references, summary)


def run_drift(args):
    out = subprocess.run([args.drift, "bench", "-m", args.model, "-p", str(args.p), "-n", str(args.n),
                          "-r", "1", "-t", str(args.threads)], check=True, capture_output=True,
                         text=True, env=drift_env(args)).stdout
    record = json.loads(out.strip().splitlines()[-1])
    rates = {t["test"][:2]: t["tokens_per_second"] for t in record["tests"]}
    return rates, record


def run_reference(args, bin_dir, extra):
    exe = os.path.join(bin_dir, "llama-bench")
    out = subprocess.run([exe, "-m", args.model, "-p", str(args.p), "-n", str(args.n), "-r", "1",
                          "-t", str(args.threads), "-o", "json", *extra], check=True,
                         capture_output=True, text=True).stdout
    # ik_llama.cpp may print lines before the JSON array.
    tests = json.loads(out[out.index("["):])
    rates, build = {}, None
    for test in tests:
        kind = "pp" if test["n_prompt"] > 0 and test["n_gen"] == 0 else "tg"
        rates[kind] = test["avg_ts"]
        build = f'{test.get("build_commit")} (build {test.get("build_number")})'
    return rates, build


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    add_reference_args(parser)
    parser.add_argument("-p", type=int, default=512)
    parser.add_argument("-n", type=int, default=128)
    args = parser.parse_args()
    refs = references(args)

    rates = {"drift": {"pp": [], "tg": []}}
    rates.update({name: {"pp": [], "tg": []} for name, _, _ in refs})
    builds = {}
    record = None
    for r in range(args.rounds):
        got, record = run_drift(args)
        for k in ("pp", "tg"):
            rates["drift"][k].append(got[k])
        for name, bin_dir, extra in refs:
            got, builds[name] = run_reference(args, bin_dir, extra)
            for k in ("pp", "tg"):
                rates[name][k].append(got[k])
        print(f"round {r + 1}: " + " | ".join(
            f"{name} pp {v['pp'][-1]:.1f} tg {v['tg'][-1]:.1f}" for name, v in rates.items()),
            file=sys.stderr)

    result = {
        "workload": "single", "model": os.path.basename(args.model), "threads": args.threads,
        "drift_commit": drift_commit(), "references": builds, "cpu": cpu_model(),
        "drift_isa": record["isa"], "ik_args": args.ik_args if args.ik_llama_bin else None,
        "bandwidth_gb_per_s": record["bandwidth_bytes_per_second"] / 1e9,
        "decode_roofline_tokens_per_s": record["decode_roofline_tokens_per_second"],
        "rounds": args.rounds,
    }
    names = [name for name, _, _ in refs]
    print("| test | drift t/s | " + " | ".join(f"{n} t/s | drift / {n}" for n in names) + " |")
    print("| --- | ---: |" + " ---: | ---: |" * len(names))
    for kind, n in (("pp", args.p), ("tg", args.n)):
        d = summary(rates["drift"][kind])
        entry = {"drift": d}
        cells = []
        for name in names:
            ref = summary(rates[name][kind])
            entry[name] = ref
            entry[f"ratio_{name}"] = d["median"] / ref["median"]
            cells.append(f"{ref['median']:.1f} ({ref['min']:.1f}-{ref['max']:.1f}) | "
                         f"{entry[f'ratio_{name}']:.2f}")
        result[f"{kind}{n}"] = entry
        print(f"| {kind}{n} | {d['median']:.1f} ({d['min']:.1f}-{d['max']:.1f}) | " +
              " | ".join(cells) + " |")
    decode_share = summary(rates["drift"]["tg"])["median"] / result["decode_roofline_tokens_per_s"]
    result["decode_share_of_roofline"] = decode_share
    print(f"drift's kernels: {record['isa']}; memory read bandwidth "
          f"{result['bandwidth_gb_per_s']:.1f} GB/s; decode ceiling "
          f"{result['decode_roofline_tokens_per_s']:.0f} t/s (drift at {100 * decode_share:.0f}%); " +
          "; ".join(f"{name} {build}" for name, build in builds.items()))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
