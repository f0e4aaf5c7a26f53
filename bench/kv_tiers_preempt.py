"""The preemption workload of bench/kv_tiers.py (issue 29): swapping to the disk tier against
recomputing, on a load that must preempt.

--preempt-clients requests at once, each a prompt of --preempt-prompt random token ids and
--preempt-gen generated tokens (greedy, ignore_eos), to a server whose pool (--preempt-kv-mib)
holds about half of what they need together, admitted optimistically
(`--admission optimistic`): the pool fills while they decode, and the scheduler preempts the
latest. Policies: --preemption recompute without a tier (what a server without --kv-cache-dir
does: a preempted sequence's pages are freed and its tokens computed again at re-admission),
swap with `--kv-cache-dir` (its pages written to the tier and read back) and auto with it (the
step cost model's choice, sequence by sequence). Reported per policy: wall time, generated tokens/s over all clients, the
median and worst end-to-end latency, the preemptions of each kind (/metrics), and whether every
answer's text equals the recompute run's (greedy: it must).
"""
import re
import shutil
import statistics
import tempfile
import threading
import time
import urllib.request

from http_client import ServerProcess, stream_completion

POLICIES = ("recompute", "swap", "auto")


def preemptions(server):
    """(swapped, recomputed): vllm:num_preemptions_total counts every preemption, drift's
    kv_preemptions_total{mode="swap"} those swapped (it exists only with a tier)."""
    text = urllib.request.urlopen(server.url + "/metrics", timeout=5).read().decode()

    def sample(pattern):
        m = re.search(pattern + r" ([0-9.e+]+)$", text, re.M)
        return int(float(m.group(1))) if m else 0

    total = sample(r"^vllm:num_preemptions_total(?:\{[^}]*\})?")
    swapped = sample(r'^drift:kv_preemptions_total\{[^}]*mode="swap"[^}]*\}')
    return swapped, total - swapped


def run_policy(args, prompts, policy):
    directory = tempfile.mkdtemp(prefix="drift-kv-preempt-")
    extra = ["--kv-mib", str(args.preempt_kv_mib), "--threads", str(args.threads), "--ctx-size",
             str(args.preempt_prompt + args.preempt_gen + 16), "--parallel",
             str(len(prompts)), "--admission", "optimistic", "--preemption", policy]
    if policy != "recompute":
        extra += ["--kv-cache-dir", directory, "--kv-cache-dir-gib", str(args.dir_gib)]
    results = [None] * len(prompts)
    try:
        with ServerProcess.drift(args.model, extra, drift=args.drift) as server:
            def client(i):
                results[i] = stream_completion(
                    server.url, {"prompt": prompts[i], "max_tokens": args.preempt_gen,
                                 "temperature": 0, "ignore_eos": True})

            start = time.perf_counter()
            threads = [threading.Thread(target=client, args=(i,)) for i in range(len(prompts))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - start
            swapped, recomputed = preemptions(server)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    failed = [r.error for r in results if r.error is not None]
    if failed:
        raise RuntimeError(f"drift --preemption {policy}: {len(failed)} requests failed: "
                           f"{failed[0]}")
    e2e = [r.end_to_end for r in results]
    return {"policy": policy, "wall_s": wall,
            "tokens_per_s": len(prompts) * args.preempt_gen / wall,
            "e2e_median_s": statistics.median(e2e), "e2e_max_s": max(e2e),
            "swapped": swapped, "recomputed": recomputed,
            "texts": [r.text for r in results]}


def run_preempt(args, rng):
    prompts = [[rng.randrange(1000, 40000) for _ in range(args.preempt_prompt)]
               for _ in range(args.preempt_clients)]
    rows = [run_policy(args, prompts, policy) for policy in POLICIES]
    reference = rows[0]["texts"]
    for r in rows:
        r["same_text"] = r.pop("texts") == reference
    return rows


def print_preempt(args, rows):
    print(f"\nPreemption: {args.preempt_clients} requests at once of {args.preempt_prompt} prompt "
          f"+ {args.preempt_gen} generated tokens, --kv-mib {args.preempt_kv_mib:g}, "
          "--admission optimistic")
    print("| --preemption | wall s | generated t/s | e2e median s | e2e max s | swapped | "
          "recomputed | text = recompute's |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        print(f"| {r['policy']} | {r['wall_s']:.2f} | {r['tokens_per_s']:.1f} | "
              f"{r['e2e_median_s']:.2f} | {r['e2e_max_s']:.2f} | {r['swapped']} | "
              f"{r['recomputed']} | {r['same_text']} |")


def add_preempt_args(p):
    p.add_argument("--preempt-clients", type=int, default=4)
    p.add_argument("--preempt-prompt", type=int, default=1500)
    p.add_argument("--preempt-gen", type=int, default=200)
    p.add_argument("--preempt-kv-mib", type=float, default=80,
                   help="about half of what the preemption workload's requests need together")
