#!/usr/bin/env python3
"""Writes GGUFs with the geometry of models this machine cannot download, so that the kernels'
gains can be measured beyond the 135M default model (random weights: the speed of a matmul or an
attention does not depend on what the weights mean).

Geometries (as their published configs give them):
  qwen2-0.5b   Qwen2.5-0.5B:  n_embd 896, 24 layers, 14 heads of 64, 2 KV heads, n_ff 4864,
               vocab 151936, q/k/v biases, tied output, rope base 1e6
  llama-1b     Llama 3.2 1B:  n_embd 2048, 16 layers, 32 heads of 64, 8 KV heads, n_ff 8192,
               vocab 128256, tied output, rope base 5e5 (its rope_freqs scaling left out)
  llama-3b     Llama 3.2 3B:  n_embd 3072, 28 layers, 24 heads of 128, 8 KV heads, n_ff 8192,
               vocab 128256, tied output, rope base 5e5 (its rope_freqs scaling left out)
  qwen3-4b     Qwen3-4B:      n_embd 2560, 36 layers, 32 heads of 128 (a query width of 4096),
               8 KV heads, RMS norms on q and k per head, n_ff 9728, vocab 151936, tied output,
               rope base 1e6
  gpt-oss-2l   two layers of gpt-oss-20b: n_embd 2880, 64 query heads of 64 over 8 KV heads with
               biases and a sink logit per head, NEOX RoPE base 150000 with YaRN (factor 32 over
               4096), layer 0 sliding (window 128), layer 1 full; 32 experts of width 2880 with
               top-4 routing, router and expert biases, the clamped SwiGLU; untied output. Its
               vocabulary is 16384 (gpt-oss's 201088 scaled by 2 / 24 layers, so the output
               matrix keeps its share of a decode step's bytes). Quantize it with MXFP4_MOE:
               experts MXFP4, the other matrices Q8_0, ~1 GB.

The vocabulary is the default model's (SmolLM2's byte-level BPE, read from its GGUF; for
gpt-oss-2l the gpt-oss test fixture's) padded with control tokens to the geometry's size, so both
engines tokenize and the output matrix has its real shape. Weights are written as F16 and then
quantized by llama.cpp's llama-quantize from an existing build (--llama-bin or $LLAMA_CPP_BIN) to
each --types entry:

  bench/make_synthetic_model.py --arch qwen2-0.5b --types Q4_K_M,Q8_0 --out-dir ~/.cache/drift/synthetic
  bench/make_synthetic_model.py --arch gpt-oss-2l --types MXFP4_MOE

Needs the `gguf` and `numpy` Python packages (pip install gguf numpy).
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import ROOT, default_model  # noqa: E402

GEOMETRIES = {
    "qwen2-0.5b": dict(arch="qwen2", n_embd=896, n_layer=24, n_head=14, n_head_kv=2, n_ff=4864,
                       n_vocab=151936, bias=True, rope_base=1e6, rms_eps=1e-6, n_ctx=32768),
    "llama-1b": dict(arch="llama", n_embd=2048, n_layer=16, n_head=32, n_head_kv=8, n_ff=8192,
                     n_vocab=128256, bias=False, rope_base=5e5, rms_eps=1e-5, n_ctx=131072),
    "llama-3b": dict(arch="llama", n_embd=3072, n_layer=28, n_head=24, n_head_kv=8, n_ff=8192,
                     n_vocab=128256, bias=False, rope_base=5e5, rms_eps=1e-5, n_ctx=131072),
    "qwen3-4b": dict(arch="qwen3", n_embd=2560, n_layer=36, n_head=32, n_head_kv=8, head_dim=128,
                     n_ff=9728, n_vocab=151936, bias=False, qk_norm=True, rope_base=1e6,
                     rms_eps=1e-6, n_ctx=40960),
    "gpt-oss-2l": dict(arch="gpt-oss", n_embd=2880, n_layer=2, n_head=64, n_head_kv=8,
                       head_dim=64, n_expert=32, n_expert_used=4, n_ff_exp=2880, n_vocab=16384,
                       rope_base=150000.0, yarn_factor=32.0, yarn_orig_ctx=4096,
                       sliding_window=128, rms_eps=1e-5, n_ctx=131072,
                       vocab_from=os.path.join(ROOT, "tests", "data", "model",
                                               "gpt-oss-synthetic.gguf")),
}


def read_vocab(path, n_vocab):
    reader = gguf.GGUFReader(path)

    def strings(key):
        field = reader.fields[key]
        return [bytes(field.parts[i]).decode("utf-8") for i in field.data]

    tokens = strings("tokenizer.ggml.tokens")
    merges = strings("tokenizer.ggml.merges")
    types_field = reader.fields["tokenizer.ggml.token_type"]
    types = [int(types_field.parts[i][0]) for i in types_field.data]
    pre = bytes(reader.fields["tokenizer.ggml.pre"].parts[-1]).decode("utf-8")
    if n_vocab < len(tokens):
        raise SystemExit(f"the geometry's vocabulary ({n_vocab}) is smaller than the source's")
    for i in range(len(tokens), n_vocab):
        tokens.append(f"<|synthetic_{i}|>")
        types.append(int(gguf.TokenType.CONTROL))
    return tokens, types, merges, pre


def write_f16(path, g, vocab, seed):
    tokens, types, merges, pre = vocab
    rng = np.random.default_rng(seed)
    d = g["n_embd"]
    hd = g.get("head_dim", d // g["n_head"])
    q_dim, kv = g["n_head"] * hd, g["n_head_kv"] * hd

    def mat(rows, cols, std):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * std).astype(np.float16)

    def vec(n, std, mean=0.0):
        return (mean + rng.standard_normal(n, dtype=np.float32) * std).astype(np.float32)

    # Through a temporary file: a 3B-4B model's F16 tensors (6-8 GB) are not all held in memory.
    w = gguf.GGUFWriter(path, g["arch"], use_temp_file=True)
    w.add_name(f"drift synthetic {g['arch']}")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(g["n_ctx"])
    w.add_embedding_length(d)
    w.add_block_count(g["n_layer"])
    w.add_feed_forward_length(g["n_ff"])
    w.add_head_count(g["n_head"])
    w.add_head_count_kv(g["n_head_kv"])
    if "head_dim" in g:
        w.add_key_length(hd)
        w.add_value_length(hd)
    w.add_rope_freq_base(g["rope_base"])
    w.add_layer_norm_rms_eps(g["rms_eps"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)
    w.add_add_bos_token(False)
    w.add_tensor("token_embd.weight", mat(g["n_vocab"], d, 1.0))
    for il in range(g["n_layer"]):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", vec(d, 0.1, 1.0))
        w.add_tensor(p + "attn_q.weight", mat(q_dim, d, 1.5 / np.sqrt(d)))
        w.add_tensor(p + "attn_k.weight", mat(kv, d, 1.5 / np.sqrt(d)))
        w.add_tensor(p + "attn_v.weight", mat(kv, d, 1.0 / np.sqrt(d)))
        if g["bias"]:
            w.add_tensor(p + "attn_q.bias", vec(q_dim, 0.5))
            w.add_tensor(p + "attn_k.bias", vec(kv, 1.0))
            w.add_tensor(p + "attn_v.bias", vec(kv, 0.1))
        if g.get("qk_norm"):
            w.add_tensor(p + "attn_q_norm.weight", vec(hd, 0.1, 1.0))
            w.add_tensor(p + "attn_k_norm.weight", vec(hd, 0.1, 1.0))
        w.add_tensor(p + "attn_output.weight", mat(d, q_dim, 1.0 / np.sqrt(q_dim)))
        w.add_tensor(p + "ffn_norm.weight", vec(d, 0.1, 1.0))
        w.add_tensor(p + "ffn_gate.weight", mat(g["n_ff"], d, 1.0 / np.sqrt(d)))
        w.add_tensor(p + "ffn_up.weight", mat(g["n_ff"], d, 1.0 / np.sqrt(d)))
        w.add_tensor(p + "ffn_down.weight", mat(d, g["n_ff"], 1.0 / np.sqrt(g["n_ff"])))
    w.add_tensor("output_norm.weight", vec(d, 0.1, 1.0))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_gpt_oss_f16(path, g, vocab, seed):
    """gpt-oss's tensors as llama.cpp's openai-moe graph reads them (see
    scripts/fixtures/make_gpt_oss_synthetic.py for the same model at test size), written through a
    temporary file so that only one tensor is in memory at a time."""
    tokens, types, merges, pre = vocab
    rng = np.random.default_rng(seed)
    d, hd, n_exp, ff = g["n_embd"], g["head_dim"], g["n_expert"], g["n_ff_exp"]
    q_dim, kv_dim = g["n_head"] * hd, g["n_head_kv"] * hd

    def mat(shape, std):
        out = np.empty(shape, dtype=np.float16)
        for i in range(shape[0]):  # one expert (or row block) at a time: float32 stays small
            out[i] = rng.standard_normal(shape[1:], dtype=np.float32) * std
        return out

    def vec(shape, std, mean=0.0):
        return (mean + rng.standard_normal(shape, dtype=np.float32) * std).astype(np.float32)

    w = gguf.GGUFWriter(path, "gpt-oss", use_temp_file=True)
    w.add_name("drift synthetic gpt-oss-2l")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(g["n_ctx"])
    w.add_embedding_length(d)
    w.add_block_count(g["n_layer"])
    w.add_feed_forward_length(ff)
    w.add_expert_feed_forward_length(ff)
    w.add_expert_count(n_exp)
    w.add_expert_used_count(g["n_expert_used"])
    w.add_head_count(g["n_head"])
    w.add_head_count_kv(g["n_head_kv"])
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_freq_base(g["rope_base"])
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(g["yarn_factor"])
    w.add_rope_scaling_orig_ctx_len(g["yarn_orig_ctx"])
    w.add_sliding_window(g["sliding_window"])
    w.add_layer_norm_rms_eps(g["rms_eps"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)
    w.add_add_bos_token(False)
    w.add_tensor("token_embd.weight", mat((g["n_vocab"], d), 1.0))
    for il in range(g["n_layer"]):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", vec(d, 0.1, 1.0))
        w.add_tensor(p + "attn_q.weight", mat((q_dim, d), 1.5 / np.sqrt(d)))
        w.add_tensor(p + "attn_q.bias", vec(q_dim, 0.3))
        w.add_tensor(p + "attn_k.weight", mat((kv_dim, d), 1.5 / np.sqrt(d)))
        w.add_tensor(p + "attn_k.bias", vec(kv_dim, 0.3))
        w.add_tensor(p + "attn_v.weight", mat((kv_dim, d), 1.0 / np.sqrt(d)))
        w.add_tensor(p + "attn_v.bias", vec(kv_dim, 0.3))
        w.add_tensor(p + "attn_output.weight", mat((d, q_dim), 0.5 / np.sqrt(q_dim)))
        w.add_tensor(p + "attn_output.bias", vec(d, 0.1))
        w.add_tensor(p + "attn_sinks.weight", vec(g["n_head"], 1.0, 1.0))
        w.add_tensor(p + "post_attention_norm.weight", vec(d, 0.1, 1.0))
        w.add_tensor(p + "ffn_gate_inp.weight", vec((n_exp, d), 4.0 / np.sqrt(d)))
        w.add_tensor(p + "ffn_gate_inp.bias", vec(n_exp, 0.5))
        w.add_tensor(p + "ffn_gate_exps.weight", mat((n_exp, ff, d), 1.5 / np.sqrt(d)))
        w.add_tensor(p + "ffn_gate_exps.bias", vec((n_exp, ff), 2.0))
        w.add_tensor(p + "ffn_up_exps.weight", mat((n_exp, ff, d), 1.5 / np.sqrt(d)))
        w.add_tensor(p + "ffn_up_exps.bias", vec((n_exp, ff), 2.0))
        w.add_tensor(p + "ffn_down_exps.weight", mat((n_exp, d, ff), 0.2 / np.sqrt(ff)))
        w.add_tensor(p + "ffn_down_exps.bias", vec((n_exp, d), 0.1))
    w.add_tensor("output_norm.weight", vec(d, 0.1, 1.0))
    w.add_tensor("output.weight", mat((g["n_vocab"], d), 3.0 / np.sqrt(d)))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", choices=sorted(GEOMETRIES), required=True)
    ap.add_argument("--types", default="Q4_K_M,Q8_0", help="llama-quantize types, comma-separated")
    ap.add_argument("--out-dir", default=os.path.expanduser("~/.cache/drift/synthetic"))
    ap.add_argument("--vocab-from", help="GGUF whose tokenizer is reused (default: the default "
                    "model's; for gpt-oss-2l the gpt-oss test fixture's)")
    ap.add_argument("--llama-bin", default=os.environ.get("LLAMA_CPP_BIN"))
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if not args.llama_bin:
        raise SystemExit("--llama-bin or LLAMA_CPP_BIN: a llama.cpp build with llama-quantize")
    g = GEOMETRIES[args.arch]
    os.makedirs(args.out_dir, exist_ok=True)
    f16 = os.path.join(args.out_dir, f"{args.arch}.F16.gguf")
    outputs = {q: os.path.join(args.out_dir, f"{args.arch}.{q}.gguf") for q in args.types.split(",")}
    missing = [q for q, path in outputs.items() if not os.path.exists(path)]
    if missing and not os.path.exists(f16):
        vocab = read_vocab(args.vocab_from or g.get("vocab_from", default_model()), g["n_vocab"])
        writer = write_gpt_oss_f16 if g["arch"] == "gpt-oss" else write_f16
        writer(f16 + ".part", g, vocab, args.seed)
        os.replace(f16 + ".part", f16)
    for qtype, out in outputs.items():
        if qtype in missing:
            subprocess.run([os.path.join(args.llama_bin, "llama-quantize"), f16, out + ".part", qtype],
                           check=True, stdout=subprocess.DEVNULL)
            os.replace(out + ".part", out)
        print(out)
    if os.path.exists(f16):
        os.remove(f16)  # only the quantized files are benchmarked


if __name__ == "__main__":
    main()
