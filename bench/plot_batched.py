#!/usr/bin/env python3
"""Draws aggregate decode t/s (S_TG) against batch size for drift and llama.cpp from the JSON line
that bench/compare_batched.py prints (its last line), as a PNG.

  bench/compare_batched.py --llama-bin $LLAMA_CPP_BIN --npl 1,2,4,8,16,32,64 | tee batched.txt
  bench/plot_batched.py batched.txt -o docs/batched.png
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")  # no display: write the file only
import matplotlib.pyplot as plt  # noqa: E402


def load_result(path):
    """The last JSON line of compare_batched.py's output."""
    with open(path) as f:
        lines = [line for line in f if line.startswith("{")]
    if not lines:
        sys.exit(f"{path}: no JSON line from compare_batched.py")
    return json.loads(lines[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", help="output of bench/compare_batched.py")
    parser.add_argument("-o", "--output", default="batched.png")
    args = parser.parse_args()
    result = load_result(args.result)
    levels = sorted(result["levels"], key=int)
    n = [int(x) for x in levels]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for key, label, style in (("drift_tg", "drift", "o-"), ("llama_tg", "llama.cpp", "s--")):
        med = [result["levels"][x][key]["median"] for x in levels]
        lo = [result["levels"][x][key]["min"] for x in levels]
        hi = [result["levels"][x][key]["max"] for x in levels]
        ax.plot(n, med, style, label=label)
        ax.fill_between(n, lo, hi, alpha=0.2)
    ax.set_xscale("log", base=2)
    ax.set_xticks(n, [str(x) for x in n])
    ax.set_xlabel("sequences decoding at once")
    ax.set_ylabel("aggregate decode tokens/s (S_TG)")
    ax.set_title(f"{result['model']}, {result['threads']} threads, "
                 f"{result['npp']}+{result['ntg']} tokens per sequence\n{result['cpu']}",
                 fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.output)
    print(args.output)


if __name__ == "__main__":
    main()
