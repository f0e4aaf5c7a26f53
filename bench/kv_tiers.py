#!/usr/bin/env python3
"""The KV disk tier (--kv-cache-dir): time to first token of long documents asked again after
they no longer fit in the RAM pool, and after a restart, with and without the tier; and a
RAG-like mix's goodput (bench/kv_tiers_rag.py), also against llama-server; and preemption by
swapping to the tier against recomputing (bench/kv_tiers_preempt.py).

  bench/kv_tiers.py [--workload reask|rag|preempt|all] [--model SmolLM2-135M-Instruct.Q4_1.gguf]
      [--docs 6] [--doc-tokens 2000] [--kv-mib 96] [--max-tokens 16] [-t 2] [--json out.json]
      [--rag-docs 8] [--concurrency 4] [--ttft-slo 2] [--rounds 3] [--llama-bin DIR]
      [--preempt-clients 4] [--preempt-prompt 1500] [--preempt-gen 200] [--preempt-kv-mib 80]

Re-ask workload:

Each configuration starts a fresh `drift serve --kv-mib M` (prefix cache on; with the tier also
`--kv-cache-dir` on a new temporary directory) and asks --docs documents of --doc-tokens random
token ids, one after another, greedy, --max-tokens each: the cold pass. --kv-mib is chosen so the
pool holds about two documents, so by the end of a pass the first ones have left RAM. Then the
same documents again, in the same order (each was evicted by the ones after it): the re-ask pass.
With the tier, the server is then stopped (SIGTERM: its cached pages are written back) and started
again on the same directory, and the documents asked a third time: the restart pass. With
--llama-bin, llama-server runs the same three passes with its prompt cache in RAM (--cache-ram of
the same MiB; a restart leaves it empty). Reports the
median TTFT of each pass, its ratio to the cold one, the pages the tier read back (/metrics), and
whether every answer's text equals the cold pass's.
"""
import argparse
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import DRIFT, cpu_model, drift_commit  # noqa: E402
from http_client import ServerProcess, stream_completion  # noqa: E402
from kv_tiers_preempt import add_preempt_args, print_preempt, run_preempt  # noqa: E402
from kv_tiers_rag import add_rag_args, print_rag, run_rag  # noqa: E402


def counter(text, name, labels=""):
    m = re.search(rf"^{re.escape(name)}\{{[^}}]*{re.escape(labels)}[^}}]*\}} ([0-9.e+]+)", text,
                  re.M)
    return float(m.group(1)) if m else 0.0


def ask_all(server, docs, max_tokens):
    """Asks each document in turn; returns (ttfts, texts). drift must answer every request;
    llama-server answers some random-token prompts with a 500 when its reply parser meets a
    special token (kv_tiers_rag.run_clients): such a document gets no TTFT and text None."""
    ttfts, texts = [], []
    for doc in docs:
        r = stream_completion(server.url, {"prompt": doc, "max_tokens": max_tokens,
                                           "temperature": 0, "ignore_eos": True})
        if r.error is not None and server.name == "drift":
            raise RuntimeError(f"request failed: {r.error}")
        if r.error is None:
            ttfts.append(r.ttft)
        texts.append(r.text if r.error is None else None)
    return ttfts, texts


def disk_pages_read(server):
    text = urllib.request.urlopen(server.url + "/metrics", timeout=5).read().decode()
    return counter(text, "drift:kv_tier_hit_pages_total", 'medium="DISK"')


def run(args, docs, tier):
    extra = ["--kv-mib", str(args.kv_mib), "--threads", str(args.threads),
             "--ctx-size", str(args.doc_tokens + args.max_tokens + 16)]
    directory = tempfile.mkdtemp(prefix="drift-kv-tiers-") if tier else None
    if tier:
        extra += ["--kv-cache-dir", directory, "--kv-cache-dir-gib", str(args.dir_gib)]
    passes = {}
    try:
        with ServerProcess.drift(args.model, extra, drift=args.drift) as server:
            passes["cold"] = ask_all(server, docs, args.max_tokens)
            passes["re-ask"] = ask_all(server, docs, args.max_tokens)
            read = disk_pages_read(server) if tier else 0.0
        if tier:
            with ServerProcess.drift(args.model, extra, drift=args.drift) as server:
                passes["restart"] = ask_all(server, docs, args.max_tokens)
                read_after_restart = disk_pages_read(server)
    finally:
        if directory:
            shutil.rmtree(directory, ignore_errors=True)
    return pass_rows("disk" if tier else "RAM only", passes,
                     {"re-ask": read, "restart": read_after_restart if tier else 0.0})


def pass_rows(server, passes, pages_read):
    cold_ttft, cold_text = passes["cold"]
    rows = []
    for name, (ttfts, texts) in passes.items():
        rows.append({"tier": server, "pass": name, "ttft_median_s": statistics.median(ttfts),
                     "ratio_to_cold": statistics.median(ttfts) / statistics.median(cold_ttft),
                     "same_text": texts == cold_text, "answered": len(ttfts),
                     "disk_pages_read": pages_read.get(name)})
    return rows


def run_llama(args, docs):
    """llama-server with its prompt cache in RAM (--cache-ram of drift's --kv-mib), one slot:
    cold, re-ask, and a restarted server (it keeps nothing across a restart)."""
    extra = ["-np", "1", "-c", str(args.doc_tokens + args.max_tokens + 16), "-t",
             str(args.threads), "--cache-ram", str(int(args.kv_mib))]
    passes = {}
    with ServerProcess.llama(args.llama_bin, args.model, extra) as server:
        passes["cold"] = ask_all(server, docs, args.max_tokens)
        passes["re-ask"] = ask_all(server, docs, args.max_tokens)
    with ServerProcess.llama(args.llama_bin, args.model, extra) as server:
        passes["restart"] = ask_all(server, docs, args.max_tokens)
    return pass_rows("llama-server --cache-ram", passes, {})


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--drift", default=DRIFT)
    cache = os.environ.get("DRIFT_CACHE", os.path.expanduser("~/.cache/drift"))
    p.add_argument("--model", default=os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--docs", type=int, default=6)
    p.add_argument("--doc-tokens", type=int, default=2000)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--kv-mib", type=float, default=96)
    p.add_argument("--dir-gib", type=float, default=4)
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("--json")
    p.add_argument("--workload", choices=["reask", "rag", "preempt", "all"], default="all")
    add_rag_args(p)
    add_preempt_args(p)
    args = p.parse_args()
    out = {}
    if args.workload in ("reask", "all"):
        out["reask"] = run_reask(args)
    if args.workload in ("rag", "all"):
        out["rag"] = run_rag(args, disk_pages_read)
        print_rag(args, out["rag"])
    if args.workload in ("preempt", "all"):
        out["preempt"] = run_preempt(args, random.Random(291))
        print_preempt(args, out["preempt"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


def run_reask(args):
    rng = random.Random(29)
    docs = [[rng.randrange(1000, 40000) for _ in range(args.doc_tokens)] for _ in range(args.docs)]
    rows = run(args, docs, tier=False) + run(args, docs, tier=True)
    if args.llama_bin:
        rows += run_llama(args, docs)
    print(f"{args.docs} documents of {args.doc_tokens} tokens + {args.max_tokens}, --kv-mib "
          f"{args.kv_mib:g}, -t {args.threads}, {os.path.basename(args.model)}, {cpu_model()}, "
          f"drift {drift_commit()}")
    print("| server | pass | TTFT median s | x cold | pages read from disk | text = cold | "
          "answered |")
    print("| --- | --- | ---: | ---: | ---: | --- | ---: |")
    for r in rows:
        pages = "" if r["disk_pages_read"] is None else f"{r['disk_pages_read']:.0f}"
        print(f"| {r['tier']} | {r['pass']} | {r['ttft_median_s']:.3f} | "
              f"{r['ratio_to_cold']:.2f} | {pages} | {r['same_text']} | "
              f"{r['answered']} of {args.docs} |")
    return rows


if __name__ == "__main__":
    main()
