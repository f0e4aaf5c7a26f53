#!/usr/bin/env python3
"""Throughput of constrained decoding through the server: 16 concurrent requests that each must
follow a JSON schema against 16 concurrent free requests, same prompt, same number of tokens.

Both kinds generate exactly --gen tokens: the free ones ignore EOS, the constrained ones follow a
schema whose documents are longer than --gen tokens (an array of at least 200 strings), so both
end by length and every step carries the same batch. Rounds alternate the two kinds; prints the
generated tokens per second of each round, the medians and their ratio (target: >= 0.8).

  bench/constrained_throughput.py [-m MODEL] [--concurrency 16] [--gen 96] [--rounds 3]
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import default_model  # noqa: E402
from http_client import ServerProcess  # noqa: E402

LONG_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 40},
        "kind": {"enum": ["list", "table", "notes"]},
        "items": {"type": "array", "minItems": 200,
                  "items": {"type": "object",
                            "properties": {"name": {"type": "string", "maxLength": 16},
                                           "rank": {"type": "integer", "minimum": 1}},
                            "required": ["name", "rank"], "additionalProperties": False}},
    },
    "required": ["title", "kind", "items"],
    "additionalProperties": False,
}
PROMPT = [{"role": "user", "content": "List the world's largest cities as JSON."}]


def request(url, gen, seed, constrained):
    body = {"messages": PROMPT, "max_tokens": gen, "temperature": 1.0, "seed": seed}
    if constrained:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "cities", "schema": LONG_SCHEMA}}
    else:
        body["ignore_eos"] = True
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        out = json.loads(r.read())
    choice = out["choices"][0]
    if choice["finish_reason"] != "length":
        raise RuntimeError(f"expected a full-length output, got {choice['finish_reason']}")
    return out["usage"]["completion_tokens"]


def run_round(url, concurrency, gen, constrained, round_index):
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        tokens = sum(pool.map(lambda i: request(url, gen, round_index * 1000 + i, constrained),
                              range(concurrency)))
    return tokens / (time.perf_counter() - start)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", default=default_model())
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--gen", type=int, default=96)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    server_args = ["--parallel", str(args.concurrency), "--threads", str(args.threads)]
    with ServerProcess.drift(args.model, server_args) as server:
        run_round(server.url, args.concurrency, 8, True, 99)  # warm-up (and the compiler's index)
        free, constrained = [], []
        for r in range(args.rounds):
            free.append(run_round(server.url, args.concurrency, args.gen, False, r))
            constrained.append(run_round(server.url, args.concurrency, args.gen, True, r))
            print(f"round {r}: free {free[-1]:7.1f} tok/s   constrained {constrained[-1]:7.1f} "
                  f"tok/s", flush=True)
    f, c = statistics.median(free), statistics.median(constrained)
    print(f"median over {args.rounds} rounds, {args.concurrency} concurrent, {args.gen} tokens "
          f"each: free {f:.1f} tok/s, constrained {c:.1f} tok/s, ratio {c / f:.3f}")


if __name__ == "__main__":
    main()
