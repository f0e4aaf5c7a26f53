#!/usr/bin/env python3
"""The "offline" workload of shared/design/BENCHMARKS.md through the engine: 64 requests with
prompts of 64-512 tokens (seeded uniform), 128 generated tokens each (EOS ignored), all submitted
at once — run with continuous batching (--parallel N) and the same requests one at a time
(--parallel 1), alternating for --rounds rounds. Prints the median (min-max) total tokens/s,
generated tokens/s, TTFT p50/p99 and inter-token latency p50/p99 of each, and the ratios; then
one JSON line.

  bench/offline.py [-m MODEL] [--parallel 16] [--rounds 3] [--requests 64]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import add_common_args, cpu_model, drift_commit, fmt_summary, summary  # noqa: E402

# Common English words that SmolLM2's and Gemma's tokenizers keep as one token each (with their
# leading space), so a prompt of k words is about k tokens.
WORDS = ("the of and to in is was for on are with as his they at be this from have or by one had "
         "not but what all were when we there can an your which their said if do will each about "
         "how up out them then she many some so these would other into has more her two like him "
         "see time could no make than first been its who now people my made over did down only "
         "way find use may water long little very after words called just where most know").split()


def make_prompts(n, lo, hi, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi))) for _ in range(n)]


def run(args, prompts_path, parallel):
    with tempfile.NamedTemporaryFile(suffix=".json") as stats:
        subprocess.run([args.drift, "generate", "-m", args.model, "--prompts", prompts_path,
                        "-n", str(args.gen), "--ignore-eos", "--temp", "0", "--parallel",
                        str(parallel), "-t", str(args.threads), "--stats-json", stats.name],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return json.load(open(stats.name))


FIGURES = [("total_tokens_per_second", "total t/s", True),
           ("generated_tokens_per_second", "generated t/s", True),
           ("ttft_p50_ms", "TTFT p50 ms", False), ("ttft_p99_ms", "TTFT p99 ms", False),
           ("itl_p50_ms", "ITL p50 ms", False), ("itl_p99_ms", "ITL p99 ms", False)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(parser, llama=False)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--min-prompt", type=int, default=64)
    parser.add_argument("--max-prompt", type=int, default=512)
    parser.add_argument("--gen", type=int, default=128)
    parser.add_argument("--parallel", type=int, default=16)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    prompts = make_prompts(args.requests, args.min_prompt, args.max_prompt, args.seed)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(prompts) + "\n")
        prompts_path = f.name
    runs = {"batched": [], "one_at_a_time": []}
    try:
        for r in range(args.rounds):
            runs["batched"].append(run(args, prompts_path, args.parallel))
            runs["one_at_a_time"].append(run(args, prompts_path, 1))
            b, s = runs["batched"][-1], runs["one_at_a_time"][-1]
            print(f"round {r + 1}: parallel {args.parallel} {b['total_tokens_per_second']:.1f} "
                  f"t/s, one at a time {s['total_tokens_per_second']:.1f} t/s", file=sys.stderr)
    finally:
        os.unlink(prompts_path)

    first = runs["batched"][0]
    result = {"workload": "offline", "model": os.path.basename(args.model),
              "requests": args.requests, "prompt_tokens": first["prompt_tokens"],
              "generated_tokens": first["generated_tokens"], "parallel": args.parallel,
              "threads": args.threads, "drift_commit": drift_commit(), "cpu": cpu_model(),
              "rounds": args.rounds}
    print(f"| figure | parallel {args.parallel} | one at a time | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for key, label, higher_is_better in FIGURES:
        b = summary([x[key] for x in runs["batched"]])
        s = summary([x[key] for x in runs["one_at_a_time"]])
        ratio = b["median"] / s["median"] if higher_is_better else s["median"] / b["median"]
        result[key] = {"batched": b, "one_at_a_time": s, "improvement": ratio}
        print(f"| {label} | {fmt_summary(b)} | {fmt_summary(s)} | {ratio:.2f}x |")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
