#!/usr/bin/env python3
"""Per-token mask cost of the two grammar libraries drift could use (llguidance, xgrammar), at
batch 16 on a GGUF model's vocabulary, for a JSON schema with nested objects, enums and arrays.

Each of the 16 matchers follows one valid JSON document token by token, started at a different
offset, so the batch mixes states (inside strings, between keys, in arrays). Each step fills the
16 masks with the library's batched call (its own thread pool), then advances every matcher by
its next token. Prints the median and p90 of a step, the mask cost per sequence, and the grammar
compile time.

  python3 -m venv /tmp/cbench && /tmp/cbench/bin/pip install gguf tokenizers numpy \
      llguidance xgrammar torch
  /tmp/cbench/bin/python bench/constraint_mask_bench.py -m ~/.cache/drift/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import argparse
import json
import os
import statistics
import time

import gguf
import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "role": {"enum": ["admin", "editor", "viewer"]},
        "address": {
            "type": "object",
            "properties": {
                "street": {"type": "string"},
                "city": {"type": "string"},
                "country": {"enum": ["FR", "DE", "US", "JP"]},
            },
            "required": ["street", "city", "country"],
            "additionalProperties": False,
        },
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
        "scores": {"type": "array", "items": {"type": "number"}},
    },
    "required": ["name", "age", "role", "address", "tags", "scores"],
    "additionalProperties": False,
}
DOCUMENT = {
    "name": "Ada Lovelace",
    "age": 36,
    "role": "editor",
    "address": {"street": "12 St James's Square", "city": "London", "country": "US"},
    "tags": ["math", "engines", "poetry"],
    "scores": [9.5, 7.25, 10],
}


def load_vocab(path):
    """The GGUF's byte-level BPE as a `tokenizers` tokenizer, its token strings and EOS id."""
    reader = gguf.GGUFReader(path)

    def strings(key):
        f = reader.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    tokens = strings("tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in strings("tokenizer.ggml.merges")]
    types_field = reader.fields["tokenizer.ggml.token_type"]
    types = [int(types_field.parts[i][0]) for i in types_field.data]
    eos_field = reader.fields["tokenizer.ggml.eos_token_id"]
    eos = int(eos_field.parts[eos_field.data[0]][0])
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([t for t, ty in zip(tokens, types) if ty == 3])  # control tokens
    return tok, tokens, eos


def summarize(name, step_seconds, batch, compile_seconds):
    step_seconds.sort()
    med = statistics.median(step_seconds)
    mean = statistics.fmean(step_seconds)
    p90 = step_seconds[int(0.9 * (len(step_seconds) - 1))]
    print(f"{name:11s} batch {batch}: step median {med * 1e3:7.3f} ms  p90 {p90 * 1e3:7.3f} ms  "
          f"mean {mean * 1e3:7.3f} ms  per sequence {med / batch * 1e6:6.1f} us  compile {compile_seconds * 1e3:7.1f} ms")


def bench_llguidance(tok, n_vocab, eos, ids, batch, threads):
    import llguidance
    import llguidance.numpy as lnp

    lltok = llguidance.LLTokenizer(tok.to_str(), n_vocab=n_vocab, eos_token=eos)
    t0 = time.perf_counter()
    grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(SCHEMA))
    matchers = [llguidance.LLMatcher(lltok, grammar) for _ in range(batch)]
    compile_seconds = (time.perf_counter() - t0) / batch
    assert not matchers[0].is_error(), matchers[0].get_error()
    executor = llguidance.LLExecutor(num_threads=threads)
    mask = lnp.allocate_token_bitmask(batch, lltok.vocab_size)
    return run_steps("llguidance", matchers, ids, batch, compile_seconds,
                     fill=lambda: lnp.fill_next_token_bitmask_par(
                         executor, [(m, i) for i, m in enumerate(matchers)], mask),
                     consume=lambda m, t: m.consume_token(t))


def bench_xgrammar(tokens, eos, ids, batch, threads):
    import xgrammar as xgr

    info = xgr.TokenizerInfo(tokens, vocab_type=xgr.VocabType.BYTE_LEVEL, stop_token_ids=[eos])
    compiler = xgr.GrammarCompiler(info, max_threads=threads, cache_enabled=False)
    t0 = time.perf_counter()
    compiled = compiler.compile_json_schema(json.dumps(SCHEMA))
    compile_seconds = time.perf_counter() - t0
    matchers = [xgr.GrammarMatcher(compiled) for _ in range(batch)]
    batcher = xgr.BatchGrammarMatcher(max_threads=threads)
    mask = xgr.allocate_token_bitmask(batch, info.vocab_size)
    return run_steps("xgrammar", matchers, ids, batch, compile_seconds,
                     fill=lambda: batcher.batch_fill_next_token_bitmask(matchers, mask),
                     consume=lambda m, t: m.accept_token(t))


def run_steps(name, matchers, ids, batch, compile_seconds, fill, consume):
    # Matcher i starts i tokens into the document, so the batch holds 16 different states.
    positions = []
    for i, m in enumerate(matchers):
        for t in ids[:i]:
            assert consume(m, t), f"{name} refused token {t} of the document"
        positions.append(i)
    steps = []
    for _ in range(len(ids) - batch):
        t0 = time.perf_counter()
        fill()
        steps.append(time.perf_counter() - t0)
        for i, m in enumerate(matchers):
            assert consume(m, ids[positions[i]]), f"{name} refused a token of the document"
            positions[i] += 1
    summarize(name, steps, batch, compile_seconds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model",
                    default=os.path.expanduser("~/.cache/drift/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    tok, tokens, eos = load_vocab(args.model)
    ids = tok.encode(json.dumps(DOCUMENT, indent=1)).ids
    print(f"vocabulary {len(tokens)} tokens, document {len(ids)} tokens, {args.threads} threads")
    bench_llguidance(tok, len(tokens), eos, ids, args.batch, args.threads)
    bench_xgrammar(tokens, eos, ids, args.batch, args.threads)


if __name__ == "__main__":
    main()
