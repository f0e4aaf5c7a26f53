"""The RAG-like goodput workload of bench/kv_tiers.py (issue 29): a working set of documents
--rag-working-set times what the RAM pool holds, re-asked at random by --concurrency clients.

A request is a document (--doc-tokens random token ids) plus a question of its own (16 more), greedy,
--rag-max-tokens tokens. Each server first gets every document once (the warm-up, not measured:
the documents pass through RAM, and with the tier onto disk), then --rounds x documents requests,
each a document drawn at random (seeded, the same draw for every server), sent by --concurrency
clients as fast as they finish. Reported per server:

  goodput       requests finished per second whose TTFT met --ttft-slo (over the measured wall time)
  TTFT p50/p90  of the measured requests
  ITL p99       of the running requests' inter-token gaps, while other requests' pages spill
  disk pages    read back from the tier (drift's /metrics)

Servers: drift without the tier (RAM prefix cache, --kv-mib), drift with --kv-cache-dir, and with
--llama-bin llama-server with --cache-ram of the same MiB; then drift-with-the-tier and
llama-server restarted and measured again without a warm-up (what a deploy or crash leaves).
"""
import os
import queue
import random
import shutil
import tempfile
import threading
import time

from bench_common import percentile
from http_client import ServerProcess, stream_completion

QUESTION_TOKENS = 16


def make_requests(args, rng):
    """The documents, and the measured requests: (document index, prompt token ids)."""
    docs = [[rng.randrange(1000, 40000) for _ in range(args.doc_tokens)]
            for _ in range(args.rag_docs)]
    measured = []
    for _ in range(args.rounds * args.rag_docs):
        d = rng.randrange(len(docs))
        question = [rng.randrange(1000, 40000) for _ in range(QUESTION_TOKENS)]
        measured.append((d, docs[d] + question))
    return docs, measured


def run_clients(server, prompts, concurrency, max_tokens):
    """Sends every prompt from `concurrency` threads; returns (answered results, errors, wall
    seconds). A failed request is kept as an error (it counts as missing the SLO): llama-server
    answers some random-token prompts with a 500 ("The model produced output that does not
    match the expected Content-only format") when its reply parser meets a special token."""
    work = queue.Queue()
    for p in prompts:
        work.put(p)
    results, errors, lock = [], [], threading.Lock()

    def client():
        while True:
            try:
                prompt = work.get_nowait()
            except queue.Empty:
                return
            r = stream_completion(server.url, {"prompt": prompt, "max_tokens": max_tokens,
                                               "temperature": 0, "ignore_eos": True})
            with lock:
                (results if r.error is None else errors).append(r if r.error is None else r.error)

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors and server.name == "drift":  # drift must answer every request
        raise RuntimeError(f"drift: {len(errors)} requests failed, the first: {errors[0]}")
    return results, errors, time.perf_counter() - start


def measure(name, server, args, docs, measured, warm_up, disk_pages_read):
    if warm_up:
        run_clients(server, [d + [1] * QUESTION_TOKENS for d in docs], args.concurrency,
                    args.rag_max_tokens)
    read_before = disk_pages_read(server) if disk_pages_read else 0.0
    results, errors, wall = run_clients(server, [p for _, p in measured], args.concurrency,
                                        args.rag_max_tokens)
    ttfts = [r.ttft for r in results]
    gaps = [g for r in results for g in r.inter_token_gaps()]
    good = sum(1 for t in ttfts if t <= args.ttft_slo)
    return {"server": name, "requests": len(results), "failed": len(errors), "wall_s": wall,
            "goodput_rps": good / wall, "ttft_p50_s": percentile(ttfts, 50),
            "ttft_p90_s": percentile(ttfts, 90), "itl_p99_ms": percentile(gaps, 99) * 1e3,
            "disk_pages_read": (disk_pages_read(server) - read_before) if disk_pages_read else None}


def run_rag(args, disk_pages_read):
    rng = random.Random(2929)
    docs, measured = make_requests(args, rng)
    ctx = args.doc_tokens + QUESTION_TOKENS + args.rag_max_tokens + 16
    drift_args = ["--kv-mib", str(args.kv_mib), "--threads", str(args.threads), "--ctx-size",
                  str(ctx), "--parallel", str(args.concurrency)]
    rows = []
    with ServerProcess.drift(args.model, drift_args, drift=args.drift) as server:
        rows.append(measure("drift, RAM only", server, args, docs, measured, True, None))
    directory = tempfile.mkdtemp(prefix="drift-kv-rag-")
    try:
        tier_args = drift_args + ["--kv-cache-dir", directory, "--kv-cache-dir-gib",
                                  str(args.dir_gib)]
        with ServerProcess.drift(args.model, tier_args, drift=args.drift) as server:
            rows.append(measure("drift, disk tier", server, args, docs, measured, True,
                                disk_pages_read))
        with ServerProcess.drift(args.model, tier_args, drift=args.drift) as server:
            rows.append(measure("drift, disk tier, after a restart", server, args, docs,
                                measured, False, disk_pages_read))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if args.llama_bin:
        # One slot per client, each the context of one request; the prompt cache in RAM holds
        # what drift's pool does.
        llama_args = ["-np", str(args.concurrency), "-c", str(ctx * args.concurrency), "-t",
                      str(args.threads), "--cache-ram", str(int(args.kv_mib))]
        with ServerProcess.llama(args.llama_bin, args.model, llama_args) as server:
            rows.append(measure("llama-server --cache-ram", server, args, docs, measured, True,
                                None))
        with ServerProcess.llama(args.llama_bin, args.model, llama_args) as server:
            rows.append(measure("llama-server, after a restart", server, args, docs, measured,
                                False, None))
    return rows


def print_rag(args, rows):
    print(f"\nRAG-like mix: {args.rag_docs} documents of {args.doc_tokens} tokens (+{QUESTION_TOKENS}"
          f" question, {args.rag_max_tokens} generated), {args.rounds * args.rag_docs} requests by "
          f"{args.concurrency} clients, TTFT SLO {args.ttft_slo:g} s")
    print("| server | goodput req/s | TTFT p50 s | TTFT p90 s | ITL p99 ms | pages read from disk "
          "| failed |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        pages = "" if r["disk_pages_read"] is None else f"{r['disk_pages_read']:.0f}"
        print(f"| {r['server']} | {r['goodput_rps']:.2f} | {r['ttft_p50_s']:.3f} | "
              f"{r['ttft_p90_s']:.3f} | {r['itl_p99_ms']:.1f} | {pages} | {r['failed']} |")


def add_rag_args(p):
    p.add_argument("--rag-docs", type=int, default=8,
                   help="documents of the RAG mix: about 4x what --kv-mib holds")
    p.add_argument("--rag-max-tokens", type=int, default=32)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--ttft-slo", type=float, default=2.0, help="seconds")
    p.add_argument("--rounds", type=int, default=3,
                   help="measured requests per document of the RAG mix")
    p.add_argument("--llama-bin", default=os.environ.get("LLAMA_CPP_BIN"),
                   help="llama.cpp's bin directory: llama-server as a third column")
