#!/usr/bin/env python3
"""The "batched" workload of shared/design/BENCHMARKS.md: drift batched-bench next to the
llama-batched-bench of llama.cpp and of ik_llama.cpp.

For each N in --npl, N sequences of --npp prompt tokens generate --ntg tokens each. The programs
alternate (drift, llama.cpp, ik_llama.cpp, drift, ...) for --rounds rounds; the script prints, per
N, the median (min-max) aggregate decode t/s (S_TG) and prompt t/s (S_PP) of each, drift's
ratios, and drift's S_TG at each N relative to its own at the first N; then one JSON line.
--isa forces drift's kernels (compare DRIFT_ISA=avx2 with references built for AVX2 only).

  bench/compare_batched.py --llama-bin $LLAMA_CPP_BIN [--ik-llama-bin $IK_LLAMA_BIN]
                           [-m MODEL] [--rounds 3] [--npl 1,2,4,8,16] [--isa avx2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (add_common_args, add_reference_args, cpu_model, drift_commit,  # noqa: E402
                          drift_env, fmt_summary, references, summary)


def jsonl(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def run_drift(args):
    out = subprocess.run([args.drift, "batched-bench", "-m", args.model, "--npp", str(args.npp),
                          "--ntg", str(args.ntg), "--npl", args.npl, "-t", str(args.threads)],
                         check=True, capture_output=True, text=True, env=drift_env(args)).stdout
    return {r["pl"]: r for r in jsonl(out)}


def table_rows(text):
    """The rows of llama-batched-bench's Markdown table (ik_llama.cpp has no JSON output):
    | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |"""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 10 and cells[0].isdigit():
            rows[int(cells[2])] = {"pl": int(cells[2]), "speed_pp": float(cells[5]),
                                   "speed_tg": float(cells[7])}
    return rows


def run_reference(args, levels, bin_dir, extra):
    exe = os.path.join(bin_dir, "llama-batched-bench")
    ctx = max(levels) * (args.npp + args.ntg)
    # In a temporary directory: ik_llama.cpp's programs write llama.log into the working one.
    with tempfile.TemporaryDirectory() as scratch:
        out = subprocess.run([exe, "-m", os.path.abspath(args.model), "-c", str(ctx),
                              "-npp", str(args.npp), "-ntg", str(args.ntg), "-npl", args.npl,
                              "-t", str(args.threads), *extra],
                             check=True, capture_output=True, text=True, cwd=scratch)
    rows = table_rows(out.stdout + out.stderr)
    missing = [n for n in levels if n not in rows]
    if missing:
        raise SystemExit(f"{exe}: no result for N={missing}:\n{out.stdout}{out.stderr}")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser)
    parser.add_argument("--npp", type=int, default=128)
    parser.add_argument("--ntg", type=int, default=128)
    parser.add_argument("--npl", default="1,2,4,8,16,32,64")
    add_reference_args(parser, ik_args="-rtr")
    args = parser.parse_args()
    refs = references(args)
    levels = [int(x) for x in args.npl.split(",")]

    engines = ["drift"] + [name for name, _, _ in refs]
    runs = {e: {n: {"tg": [], "pp": []} for n in levels} for e in engines}
    for r in range(args.rounds):
        results = {"drift": run_drift(args)}
        for name, bin_dir, extra in refs:
            results[name] = run_reference(args, levels, bin_dir, extra)
        for e in engines:
            for n in levels:
                runs[e][n]["tg"].append(results[e][n]["speed_tg"])
                runs[e][n]["pp"].append(results[e][n]["speed_pp"])
        print(f"round {r + 1}: " + " ".join(
            f"N={n} " + " / ".join(f"{e} {runs[e][n]['tg'][-1]:.0f}" for e in engines)
            for n in levels), file=sys.stderr)

    result = {"workload": "batched", "model": os.path.basename(args.model),
              "threads": args.threads, "npp": args.npp, "ntg": args.ntg,
              "drift_commit": drift_commit(), "cpu": cpu_model(), "rounds": args.rounds,
              "drift_isa": args.isa or "best", "ik_args": args.ik_args if args.ik_llama_bin else None,
              "levels": {}}
    single = summary(runs["drift"][levels[0]]["tg"])["median"]
    refs_names = engines[1:]
    for kind, label in (("tg", "S_TG"), ("pp", "S_PP")):
        print(f"\n{label} (t/s)\n")
        print("| N | drift | " + " | ".join(f"{e} | drift / {e}" for e in refs_names) +
              (f" | drift / drift at N={levels[0]} |" if kind == "tg" else " |"))
        print("| ---: | ---: |" + " ---: | ---: |" * len(refs_names) + (" ---: |" if kind == "tg" else ""))
        for n in levels:
            d = summary(runs["drift"][n][kind])
            entry = result["levels"].setdefault(n, {})
            entry[f"drift_{kind}"] = d
            cells = []
            for e in refs_names:
                ref = summary(runs[e][n][kind])
                entry[f"{e}_{kind}"] = ref
                entry[f"{kind}_ratio_{e}"] = d["median"] / ref["median"]
                cells.append(f"{fmt_summary(ref)} | {entry[f'{kind}_ratio_{e}']:.2f}")
            line = f"| {n} | {fmt_summary(d)} | " + " | ".join(cells)
            if kind == "tg":
                entry["drift_tg_scaling"] = d["median"] / single
                line += f" | {entry['drift_tg_scaling']:.2f}"
            print(line + " |")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
