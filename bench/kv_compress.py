#!/usr/bin/env python3
"""KV-Compress: quality against memory kept (`drift perplexity`), and serving against a fixed KV
budget (`drift serve`).

  bench/kv_compress.py serve [--requests 64] [--prompt-tokens 1500] [--max-tokens 128]
      [--kv-mib 128] [--keeps 1,0.5] [--dtypes f16] [--batch-tokens 128] [--json out.json]

Serve: for each KV dtype and kv_keep, a fresh `drift serve --kv-mib M --kv-cache-dtype D
--kv-keep R` (guaranteed admission, so every admitted request completes), and all requests sent
at once (distinct prompts of about --prompt-tokens tokens, greedy, ignore_eos, --max-tokens each).
Reports the KV pages the budget holds (drift:kv_pages_total), the wall time, output and total
tokens per second, and the most requests running at once (vllm:num_requests_running, sampled
every 0.1 s) — how many conversations the same memory serves. With --keeps 1 and
--prompt-tokens + --max-tokens = 1024 it counts the 1,024-token sequences each dtype runs at once.

  bench/kv_compress.py perplexity [--models SmolLM2-135M-Instruct.Q4_1,gemma-3-270m-q4_k_m]
      [--file /usr/share/common-licenses/GPL-3] [-c 2048] [--keeps 0.5,0.25]
      [--dtypes f16,int8,int4]
      [--json out.json] [--png docs/kv_compress_perplexity.png]

For each model and KV dtype: the uncompressed perplexity, then each policy (attention, window) at
each kv_keep, the cache compressed as the text is scored (`--kv-keep R --kv-evict P`). Prints a
markdown table (perplexity and its change against the uncompressed run of the same dtype) and
draws perplexity against the fraction of KV entries kept (the `kv kept` line drift prints: the
longest head's entries over the positions, averaged over the scored tokens). The PNG needs
Debian's python3-matplotlib (run with /usr/bin/python3; without it the PNG is skipped).
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import DRIFT, cpu_model, default_model, drift_commit  # noqa: E402
from http_client import ServerProcess, stream_completion  # noqa: E402
from offline import WORDS  # noqa: E402


def run_perplexity(model_path, args, dtype, keep=None, policy=None):
    cmd = [args.drift, "perplexity", "-m", model_path, "-f", args.file, "-c", str(args.ctx), "-t",
           str(args.threads), "--kv-cache-dtype", dtype]
    if keep is not None:
        cmd += ["--kv-keep", str(keep), "--kv-evict", policy, *args.extra.split()]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    ppl = float(re.search(r"perplexity: ([0-9.]+)", out).group(1))
    kept = re.search(r"kv kept: ([0-9.]+)", out)
    return {"perplexity": ppl, "kept": float(kept.group(1)) if kept else 1.0, "command": " ".join(cmd)}


def perplexity_sweep(args):
    cache = os.environ.get("DRIFT_CACHE", os.path.expanduser("~/.cache/drift"))
    rows = []
    for model in args.models.split(","):
        path = os.path.join(cache, model + ".gguf")
        for dtype in args.dtypes.split(","):
            base = run_perplexity(path, args, dtype)
            rows.append({"model": model, "dtype": dtype, "policy": "none", "keep": 1.0, **base})
            print(f"{model} {dtype} none: {base['perplexity']:.4f}", file=sys.stderr)
            for policy in ("attention", "window"):
                for keep in (float(k) for k in args.keeps.split(",")):
                    r = run_perplexity(path, args, dtype, keep, policy)
                    rows.append({"model": model, "dtype": dtype, "policy": policy, "keep": keep, **r})
                    print(f"{model} {dtype} {policy} {keep}: {r['perplexity']:.4f} "
                          f"(kept {r['kept']:.3f})", file=sys.stderr)
    return rows


def table(rows):
    base = {(r["model"], r["dtype"]): r["perplexity"] for r in rows if r["policy"] == "none"}
    lines = ["| model | KV dtype | policy | kv_keep | entries kept | perplexity | vs uncompressed |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        b = base[(r["model"], r["dtype"])]
        change = "" if r["policy"] == "none" else f"{100 * (r['perplexity'] / b - 1):+.1f}%"
        keep = "1" if r["policy"] == "none" else f"{r['keep']:g}"
        lines.append(f"| {r['model']} | {r['dtype']} | {r['policy']} | {keep} | {r['kept']:.3f} | "
                     f"{r['perplexity']:.4f} | {change} |")
    return "\n".join(lines)


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no PNG: matplotlib is missing (Debian: python3-matplotlib)", file=sys.stderr)
        return
    models = sorted({r["model"] for r in rows})
    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4.2), squeeze=False)
    for ax, model in zip(axes[0], models):
        for dtype, style in zip(sorted({r["dtype"] for r in rows}), ("-", "--", ":")):
            for policy, color in (("attention", "tab:blue"), ("window", "tab:orange")):
                pts = sorted((r["kept"], r["perplexity"]) for r in rows if r["model"] == model and
                             r["dtype"] == dtype and r["policy"] in (policy, "none"))
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", color=color,
                        label=f"{policy}, {dtype}")
        ax.set_xlabel("KV entries kept (fraction of positions)")
        ax.set_ylabel("perplexity")
        ax.set_title(model)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}", file=sys.stderr)


def serve_once(args, dtype, keep):
    extra = ["--kv-mib", str(args.kv_mib), "--kv-cache-dtype", dtype, "--parallel",
             str(args.requests), "--batch-tokens", str(args.batch_tokens), "--max-queued",
             str(args.requests * 2), "--threads", str(args.threads), "--no-prefix-cache",
             "--kv-keep", str(keep), "--kv-evict", args.policy]
    # About one token a word of bench/offline.py's list with SmolLM2's tokenizer (measured).
    words = max(1, args.prompt_tokens)
    prompts = [f"Request {i}. " + " ".join(WORDS[(i * 7919 + j * 31) % len(WORDS)]
                                           for j in range(words)) for i in range(args.requests)]
    with ServerProcess.drift(args.model, extra, drift=args.drift) as server:
        running, pages, stop = [], [], threading.Event()

        def sample():
            while not stop.is_set():
                try:
                    text = urllib.request.urlopen(server.url + "/metrics", timeout=5).read().decode()
                    m = re.search(r"^vllm:num_requests_running(?:\{[^}]*\})? ([0-9.e+]+)", text,
                                  re.M)
                    if m:
                        running.append(float(m.group(1)))
                    m = re.search(r"^drift:kv_pages_total(?:\{[^}]*\})? ([0-9.e+]+)", text, re.M)
                    if m:
                        pages.append(float(m.group(1)))
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
    prompt_tokens = sum(r.usage["prompt_tokens"] for r in done)
    output_tokens = sum(r.usage["completion_tokens"] for r in done)
    return {"dtype": dtype, "kv_keep": keep, "kv_pages": max(pages, default=0),
            "completed": len(done), "failed": len(results) - len(done),
            "wall_s": wall, "output_tps": output_tokens / wall,
            "total_tps": (prompt_tokens + output_tokens) / wall,
            "mean_prompt_tokens": prompt_tokens / max(1, len(done)),
            "max_running": max(running, default=0)}


def serve_sweep(args):
    rows = []
    for dtype in args.dtypes.split(","):
        for keep in (float(k) for k in args.keeps.split(",")):
            r = serve_once(args, dtype, keep)
            print(f"{dtype} kv_keep {keep}: {r}", file=sys.stderr)
            rows.append(r)
    lines = ["| KV dtype | kv_keep | KV pages (tokens, 16 a page) | prompt tokens (mean) | "
             "completed | wall s | output tok/s | total tok/s | most running at once |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        done = f"{r['completed']}/{r['completed'] + r['failed']}"
        lines.append(f"| {r['dtype']} | {r['kv_keep']:g} | {r['kv_pages']:.0f} "
                     f"({16 * r['kv_pages']:,.0f}) | {r['mean_prompt_tokens']:.0f} | {done} | "
                     f"{r['wall_s']:.1f} | "
                     f"{r['output_tps']:.1f} | {r['total_tps']:.1f} | {r['max_running']:.0f} |")
    return rows, "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    ppl = sub.add_parser("perplexity", help="perplexity against memory kept")
    ppl.add_argument("--drift", default=DRIFT)
    ppl.add_argument("--models", default="SmolLM2-135M-Instruct.Q4_1,gemma-3-270m-q4_k_m")
    ppl.add_argument("--file", default="/usr/share/common-licenses/GPL-3")
    ppl.add_argument("-c", "--ctx", type=int, default=2048)
    ppl.add_argument("-t", "--threads", type=int, default=2)
    ppl.add_argument("--keeps", default="0.5,0.25")
    ppl.add_argument("--dtypes", default="f16,int8,int4")
    ppl.add_argument("--extra", default="", help="more flags for the compressed runs")
    ppl.add_argument("--json")
    ppl.add_argument("--png")
    srv = sub.add_parser("serve", help="throughput and concurrency at a fixed KV budget")
    srv.add_argument("--drift", default=DRIFT)
    srv.add_argument("--model", default=default_model())
    srv.add_argument("--requests", type=int, default=64)
    srv.add_argument("--prompt-tokens", type=int, default=1500)
    srv.add_argument("--max-tokens", type=int, default=128)
    srv.add_argument("--kv-mib", type=float, default=128)
    srv.add_argument("--batch-tokens", type=int, default=128,
                     help="chunk size: a compressed prompt is held whole only one chunk at a time")
    srv.add_argument("--keeps", default="1,0.5")
    srv.add_argument("--dtypes", default="f16", help="KV cache dtypes, each run with every keep")
    srv.add_argument("--policy", default="attention")
    srv.add_argument("-t", "--threads", type=int, default=2)
    srv.add_argument("--json")
    args = p.parse_args()
    if args.command == "serve":
        rows, text = serve_sweep(args)
        print(text)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"cpu": cpu_model(), "commit": drift_commit(), "args": vars(args),
                           "rows": rows}, f, indent=1)
    if args.command == "perplexity":
        rows = perplexity_sweep(args)
        print(table(rows))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"cpu": cpu_model(), "commit": drift_commit(), "rows": rows}, f, indent=1)
        if args.png:
            plot(rows, args.png)


if __name__ == "__main__":
    main()
