// Paged attention for a block of queries that share one KV head: softmax(q . K^T * scale) V over
// each query's visible positions, reading K/V through a page table in any KV format
// (kernels/kv_format.h: f16, bf16, f32, or int8/int4 codes with fp16 scales, dequantized in
// registers as they are loaded).
//
// The queries of a block are the tokens of one sequence times the query heads of one KV head
// (grouped-query attention), so a key or value row, once loaded and converted, serves all of them.
// Two SIMD paths compute the same canonical order: queries of several tokens (prefill) go in the
// lanes of a register with each key element broadcast; queries of one token (decode: the heads of
// a group, all with the same range) score 8 positions per fma from the transposed keys. Both need
// page_size % 8 == 0; other page sizes use the scalar path.
//
// CANONICAL ORDER (per query, whatever the block it is computed in; every ISA bitwise alike):
//   s[p]  = (fma chain over e = 0 .. head_dim-1 of q[e] * k_p[e], from +0) * scale
//   m     = max(max of s[p] over the visible positions p in [first, last], sink)
//   w[p]  = exp_approx(s[p] - m)                                          (kernels/exp_approx.h)
//   sum   = double sum of w[p] in increasing p, then + double(exp_approx(sink - m));
//   inv   = float(1 / sum)
//   o[d]  = fma chain over increasing visible p of w[p] * v_p[d], from +0
//   out[d] = o[d] * inv
// sink is the query's attention-sink logit (gpt-oss: a learned logit per head that takes a share
// of the softmax and has no value), -inf without sinks: then max and sum are bitwise those of
// plain softmax (exp_approx(-inf) = +0).
// where k_p[e], v_p[d] are the dequantized elements of kv_format.h (fp32(x), or code * scale).
//
// BF16 ORDER (bf16 K/V): the products are of two bf16 operands, what AVX-512 BF16's vdpbf16ps
// computes 32 to an instruction (twice an fma's), added in its order. With
//   q'[e] = bf16_operand(q[e]), w'[p] = bf16_operand(w[p])   (kernels/fp16.h: to nearest even,
//   magnitudes below 2^-40 to zero; stored bf16 K/V elements are such operands already),
//   s[p] = (fma chain over e in pair-swapped order of q'[e] * k_p[e], from +0) * scale
//   sum  = double sum of w'[p] in increasing p, then + double(exp_approx(sink - m))
//   o[d] = fma chain over the visible p in pair-swapped order of w'[p] * v_p[d], from +0
// where pair-swapped order is 1, 0, 3, 2, ... (2j + 1 before 2j; an index whose partner is out of
// the range alone): vdpbf16ps adds the odd product of a pair first. Such operands keep every
// product and partial sum a multiple of 2^-94, never subnormal, so the fma chain is bitwise what
// vdpbf16ps (which flushes subnormals) gives, and the paths without it run it with fmas. A chain
// never holds -0, so a zero product leaves it as it is: vdpbf16ps may add a partner the query does
// not see with weight 0.
// For a rotated format (int4) q is first rotated (kv_rotate) and out rotated back at the end, by
// the same scalar code on every ISA.
// A query's result depends only on its own q, its range and the K/V rows in that range — not on
// the other queries of the block nor on the block's size — so a token's attention output is the
// same in any batch, chunk or step.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/kv_format.h"
#include "util/cpu_features.h"

namespace drift::kernels {

inline constexpr int64_t kAttentionLanes = 16;  // queries per block (one AVX-512 register)

// Whether a KV format's attention runs in the bf16 order above (bf16 K/V) or the fp32 one.
constexpr bool attends_in_bf16(KvFormat format) { return format == KvFormat::kBF16; }
// Term i of a chain of n in pair-swapped order.
constexpr int64_t pair_swapped(int64_t i, int64_t n) { return (i ^ 1) < n ? (i ^ 1) : i; }

// K and V of one (layer, KV head) across pages: the block of page `pg` is at base + pg * stride.
// Keys are stored transposed, [head_dim][page_size] (element e of the page's positions side by
// side, so that a decode query scores 8 positions per fma); values [page_size][head_dim_v]; each
// block followed by its scales (kv_format.h).
struct PagedKv {
  const uint8_t* keys;    // key block of page 0
  const uint8_t* values;  // value block of page 0
  int64_t page_stride;    // bytes between consecutive pages' blocks
  int64_t page_size;
  const int32_t* page_table;  // physical page of positions [i * page_size, (i + 1) * page_size)
  KvFormat format = KvFormat::kF16;
};

struct AttentionQueries {
  int64_t n;                        // 1 .. kAttentionLanes
  const float* q[kAttentionLanes];  // [head_dim] each
  int64_t first[kAttentionLanes];   // visible positions [first, last], first <= last
  int64_t last[kAttentionLanes];
  float* out[kAttentionLanes];  // [head_dim_v] each
  // KV-Compress's metric (kernels/attention_metric.h): query i with bit i of metric_lanes set adds
  // its squared attention probabilities to metric[p], p over the positions it sees. Null: none.
  float* metric = nullptr;
  uint32_t metric_lanes = 0;
  // Attention sinks: query i's sink logit is sink[i] (not scaled by AttentionShape::scale, as
  // llama.cpp adds it). Without has_sinks, sink[] is not read.
  bool has_sinks = false;
  float sink[kAttentionLanes];
};

// Query i's sink logit, -inf without sinks (`static inline`: see the note in format.h).
static inline float query_sink(const AttentionQueries& queries, int64_t i) {
  return queries.has_sinks ? queries.sink[i] : -INFINITY;
}

struct AttentionShape {
  int64_t head_dim;
  int64_t head_dim_v;  // <= 256
  float scale;
};

// Value rows dequantized to fp32 by earlier calls, kept for the next calls over the same K/V.
// A prefill's blocks of one sequence and KV head each read every value row up to their last
// query's position, so converting the rows afresh for each block of queries converted the same
// rows once per block (~8% of the prefill attention at 1K context on AVX-512). Used by the SIMD
// paths for blocks of several tokens; the scalar one and decode ignore it. The rows are the
// exact elements every path reads, so results do not change.
//
// The caller owns the memory and calls reset() whenever the K/V behind a (values, page_table)
// pair may have changed — before each layer's attention of a step — and never shares one cache
// between threads.
struct ValueRowCache {
  float* rows = nullptr;  // [capacity][head_dim_v]: position begin + r in row r
  int64_t capacity = 0;   // rows
  // What the rows hold: positions [begin, end) of the value blocks at `values` through
  // `page_table`, in `format`.
  const uint8_t* values = nullptr;
  const int32_t* page_table = nullptr;
  KvFormat format = KvFormat::kF16;
  bool pairs = false;  // rows (rows_for) or bf16 pairs (pairs_for)
  int64_t begin = 0, end = 0;

  void reset() {
    values = nullptr;
    page_table = nullptr;
    begin = end = 0;
  }
  // For a block reading value rows [p0, p1] of `kv`: false when they do not fit (the block then
  // converts its own); else the rows from *missing to p1 are the caller's to write at row(),
  // after which the cache holds [p0, p1] (*missing > p1: it held them all).
  bool prepare(const PagedKv& kv, int64_t p0, int64_t p1, int64_t* missing, bool as_pairs = false);
  float* row(int64_t p, int64_t head_dim_v) const { return rows + (p - begin) * head_dim_v; }
  // Value rows [p0, p1] as fp32 rows of head_dim_v, converting through convert(p, n, out) (rows
  // [p, p + n) into out) only the ones not held yet; null when they do not fit.
  template <class Convert>
  const float* rows_for(const PagedKv& kv, int64_t head_dim_v, int64_t p0, int64_t p1,
                        Convert convert) {
    int64_t missing;
    if (!prepare(kv, p0, p1, &missing)) return nullptr;
    if (missing <= p1) convert(missing, p1 + 1 - missing, row(missing, head_dim_v));
    return row(p0, head_dim_v);
  }
  // The bf16 order's value pairs for AVX-512 BF16 (p0 even): pair (x, x + 1), x even, as
  // head_dim_v dwords of two bf16 (x + 1's in the high half, zero while x + 1 > p1) at row(x), for
  // x in [p0, p1]; convert(x0, out) writes the pairs from x0 to p1 from row(x0) on. A pair that was
  // written with a zero partner is written again once its partner is in a range: the partner's
  // row may not have existed before.
  template <class Convert>
  const float* pairs_for(const PagedKv& kv, int64_t head_dim_v, int64_t p0, int64_t p1,
                         Convert convert) {
    int64_t missing;
    if (!prepare(kv, p0, p1, &missing, /*as_pairs=*/true)) return nullptr;
    const int64_t x0 = missing & ~int64_t{1};
    if (missing <= p1) convert(x0, row(x0, head_dim_v));
    return row(p0, head_dim_v);
  }
};

// Floats of scratch one call needs for queries reaching position `max_last`.
int64_t paged_attention_scratch_floats(const AttentionShape& shape, int64_t max_last);

// Rows a ValueRowCache should hold for queries reaching position `max_last` (at most 4 MiB of
// them: past that a block converts its own rows, as without a cache).
int64_t paged_attention_value_cache_rows(const AttentionShape& shape, int64_t max_last);

// Computes out for each query of the block; scratch: paged_attention_scratch_floats floats,
// 32-byte aligned. `cache` (optional): value rows shared with the calls before and after this one.
void paged_attention(Isa isa, const AttentionShape& shape, const PagedKv& kv,
                     const AttentionQueries& queries, float* scratch,
                     ValueRowCache* cache = nullptr);

// ---- Decode attention in parts.
//
// The heads of one decoding token over one KV head are one block of paged_attention, so a lone
// sequence's decode has as many blocks as KV heads (1 for Gemma 3, 3 for SmolLM2) and leaves
// threads idle while its attention reads a long context. In parts, the same block runs as three
// passes, each dealt out as `parts` shares to several threads with a barrier after each pass:
//   1. decode_scores(part): the scores of the part's share of the positions, and their max;
//   2. decode_weights(part): the weights of its share (the max of every part's max and the
//      sink known now);
//   3. decode_values(share): out[i][d] for its share of the value dimensions (each part adds the
//      weights' double sum itself, in increasing position).
// Every number is the one paged_attention computes for the block: a position's score and weight
// depend on that position alone, the max is a max, and a dimension's fma chain runs over the
// positions in order within one part (a rotated format's outputs are rotated back by whole groups
// of dimensions, which every part's share holds). decode_splits tells which blocks may take this
// path: one range for all queries, as decode has.
struct DecodeParts {
  float* scores;  // [n][decode_span] shared by the parts: the scores, then the weights; 64-byte
                  // aligned
  float* maxima;  // [parts][kAttentionLanes] each part's maximum scores
  int parts;      // >= 1
};
bool decode_splits(const PagedKv& kv, const AttentionQueries& queries);
// Floats per query of DecodeParts::scores for queries reaching position `last` from `first`.
int64_t decode_span(int64_t first, int64_t last);
// Floats of DecodeParts::scores (for up to kDecodeMaxQueries queries) and of the private scratch
// every part of every pass takes (64-byte aligned, not shared between threads at once).
inline constexpr int64_t kDecodeMaxQueries = 8;
int64_t decode_scores_floats(int64_t max_last);
int64_t decode_private_floats(const AttentionShape& shape);
void decode_scores(Isa isa, const AttentionShape& shape, const PagedKv& kv,
                   const AttentionQueries& queries, const DecodeParts& parts, int part,
                   float* private_scratch);
void decode_weights(Isa isa, const PagedKv& kv, const AttentionQueries& queries,
                    const DecodeParts& parts, int part);
// Pass 3 over the value dimensions [d_begin, d_end) of a block (a share of decode_value_share);
// the share that holds dimension 0 also adds KV-Compress's metric.
void decode_values(Isa isa, const AttentionShape& shape, const PagedKv& kv,
                   const AttentionQueries& queries, const DecodeParts& parts, int64_t d_begin,
                   int64_t d_end, float* private_scratch);
// The value dimensions [begin, end) of head `head` (of `heads` blocks of head_dim_v that pass 3
// runs together) that part `part` of `parts` takes: the heads' dimensions, in units of 32, are one
// run dealt out in equal contiguous shares, so a part takes whole heads where there are enough and
// splits a head's dimensions only where a share ends inside it. A split head's rows are read by
// two threads a few lines each, which streams at about half the rate of whole blocks (one thread a
// row's 64 bytes, the other the next 64: ~15 against ~28 GB/s with 2 threads here); whole heads
// keep each thread on whole rows. Empty (begin == end) where the part has none of the head.
struct DimensionShare {
  int64_t begin, end;
};
DimensionShare decode_value_share(int64_t heads, int64_t head, int64_t head_dim_v, int part,
                                  int parts);

}  // namespace drift::kernels
