// A lone decoding sequence's attention in parts (kernels/paged_attention.h, "Decode attention in
// parts"): its blocks are its KV heads (1 for Gemma 3, 3 for SmolLM2), so dealt out whole they
// leave threads idle while the one with the most heads reads a long context. Here every head's
// block runs in as many parts as threads, in three passes with the pool's barrier between them;
// thread t takes part t of every head's positions (scores, weights) and its share of all heads'
// value dimensions (whole heads where it can). The outputs are bitwise those of the blocks in one
// call.
#include <algorithm>
#include <cstdint>

#include "kernels/paged_attention.h"
#include "model/forward_pass.h"

namespace drift {
namespace {

// Positions a query must see before its block is split: below, the two extra barriers of the
// passes (a few microseconds each) cost about what the idle threads would have saved.
constexpr int64_t kSplitMinPositions = 512;

}  // namespace

bool ForwardPass::attend_decode_in_parts(int64_t il, const ForwardBatch& batch, KvPages& kv,
                                         ThreadPool& pool) {
  const ModelConfig& c = config_;
  if (pool.size() < 2 || batch.sequences.size() != 1) return false;
  const ForwardSequence& s = batch.sequences[0];
  const int64_t group = c.n_heads / c.n_kv_heads;
  if (s.n_tokens != 1 || group > kernels::kDecodeMaxQueries) return false;
  const int64_t metric_from = (s.n_tokens - s.metric_tokens) * group;
  const AttentionBlock first = attention_block_of(il, s, kv, 0, 0, group, metric_from);
  if (first.queries.last[0] - first.queries.first[0] + 1 < kSplitMinPositions ||
      !kernels::decode_splits(first.kv, first.queries))
    return false;

  const kernels::AttentionShape shape{c.head_dim, c.head_dim_v, c.attention_scale};
  const int parts = pool.size();
  auto parts_of = [&](int64_t kvh) {
    float* scores = &decode_scores_[static_cast<size_t>(kvh * decode_scores_per_head_)];
    scores = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scores) + 63) / 64 * 64);
    return kernels::DecodeParts{
        scores, &decode_maxima_[static_cast<size_t>(kvh * parts * kernels::kAttentionLanes)],
        parts};
  };
  // Built once here, read by every part of the three passes.
  for (int64_t kvh = 0; kvh < c.n_kv_heads; ++kvh) {
    AttentionBlock& b = decode_blocks_[static_cast<size_t>(kvh)];
    b = kvh == 0 ? first : attention_block_of(il, s, kv, kvh, 0, group, metric_from);
    if (s.metric_tokens > 0) b.queries.metric = s.heads->metric_sums(il, kvh);
  }
  auto private_of = [&](int index) {
    return &decode_private_[static_cast<size_t>(index * decode_private_per_thread_)];
  };
  pool.run([&](int index, int) {
    for (int64_t kvh = 0; kvh < c.n_kv_heads; ++kvh) {
      const AttentionBlock& b = decode_blocks_[static_cast<size_t>(kvh)];
      kernels::decode_scores(isa_, shape, b.kv, b.queries, parts_of(kvh), index, private_of(index));
    }
  });
  pool.run([&](int index, int) {
    for (int64_t kvh = 0; kvh < c.n_kv_heads; ++kvh) {
      const AttentionBlock& b = decode_blocks_[static_cast<size_t>(kvh)];
      kernels::decode_weights(isa_, b.kv, b.queries, parts_of(kvh), index);
    }
  });
  pool.run([&](int index, int) {
    for (int64_t kvh = 0; kvh < c.n_kv_heads; ++kvh) {
      const AttentionBlock& b = decode_blocks_[static_cast<size_t>(kvh)];
      const kernels::DimensionShare share =
          kernels::decode_value_share(c.n_kv_heads, kvh, c.head_dim_v, index, parts);
      kernels::decode_values(isa_, shape, b.kv, b.queries, parts_of(kvh), share.begin, share.end,
                             private_of(index));
    }
  });
  return true;
}

}  // namespace drift
