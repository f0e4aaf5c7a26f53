// The key offsets of int4 caches (forward_pass.h, key_offsets_): the model's mean key after RoPE
// per (layer, KV head, channel), measured once on a fixed calibration sequence.
//
// Keys share a large common part (a few channels far from zero in every token), which sets the
// scale of every 4-bit group it falls in. Any fixed vector can be taken off every key without
// changing attention (softmax ignores a logit added to every position), so the pass takes off the
// mean. The mean of keys over calibration text did not depend on the text: from GPL-3, from other
// licenses or from random words, SmolLM2's int4 perplexity on held-out text came out the same
// (docs/design-notes.md), so a pseudo-random token sequence serves and no text ships with drift.
//
// RoPE turns a key by an angle that grows with its position, so a key's mean after RoPE is its
// mean before RoPE, turned by each position the cache may hold, averaged over them: slowly turning
// channel pairs keep their common part, quickly turning ones average to 0. The calibration
// measures the mean before RoPE (positions 1 ..; the first token's keys are unlike the rest) and
// averages its RoPE over positions [0, min(max_context, kRopePositions)).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/rope.h"
#include "model/forward_pass.h"
#include "model/kv_pages.h"

namespace drift {
namespace {

constexpr int64_t kCalibrationTokens = 256;
constexpr int64_t kCalibrationPage = 16;
constexpr int64_t kRopePositions = 4096;

// Token ids for the calibration: a fixed linear congruential sequence over [lo, hi), skipping the
// first 256 ids (bytes and special tokens in the vocabularies seen) and, in a large vocabulary,
// staying below 32,768 (the commoner merges).
std::vector<int32_t> calibration_tokens(int64_t n_vocab) {
  const int64_t lo = n_vocab > 512 ? 256 : 0;
  const int64_t hi = std::min<int64_t>(n_vocab, 32768);
  std::vector<int32_t> tokens(kCalibrationTokens);
  uint64_t state = 0x2545F4914F6CDD1DULL;
  for (int32_t& t : tokens) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    t = static_cast<int32_t>(lo + static_cast<int64_t>((state >> 33) % uint64_t(hi - lo)));
  }
  return tokens;
}

}  // namespace

void ForwardPass::record_keys(int64_t t, int64_t il) {
  const int64_t kv_dim = config_.kv_dim();
  std::copy_n(&k_[t * kv_dim], kv_dim, &recorded_keys_[(t * config_.n_layers + il) * kv_dim]);
}

Status ForwardPass::calibrate_key_offsets(ThreadPool& pool) {
  key_offsets_ready_ = true;
  const ModelConfig& c = config_;
  if (c.attn_sinks) return Status::Ok();  // a sink logit does not move with the keys' logits
  const int64_t n = kCalibrationTokens;
  DRIFT_ASSIGN_OR_RETURN(std::unique_ptr<ForwardPass> pass,
                         ForwardPass::create(model_, ForwardLimits{n, 1, n, limits_.threads}));
  const int64_t n_pages = n / kCalibrationPage;
  DRIFT_ASSIGN_OR_RETURN(KvPages kv,
                         KvPages::create(c, n_pages, kCalibrationPage, kernels::KvFormat::kF32));
  std::vector<int32_t> pages(n_pages);
  for (int64_t i = 0; i < n_pages; ++i) pages[i] = static_cast<int32_t>(i);
  const std::vector<int32_t> tokens = calibration_tokens(c.n_vocab);
  ForwardSequence sequence;
  sequence.n_tokens = n;
  sequence.page_table = pages;
  sequence.want_logits = true;
  std::vector<float> logits(c.n_vocab);
  const int64_t kv_dim = c.kv_dim();
  pass->recorded_keys_.assign(n * c.n_layers * kv_dim, 0.0f);
  DRIFT_RETURN_IF_ERROR(pass->run(
      ForwardBatch{tokens, std::span<const ForwardSequence>(&sequence, 1)}, kv, pool, logits));

  // mean[il][i]: the keys' mean before RoPE over positions 1 .. n - 1, summed in position order.
  std::vector<double> sum(c.n_layers * kv_dim, 0.0);
  for (int64_t t = 1; t < n; ++t)
    for (int64_t j = 0; j < c.n_layers * kv_dim; ++j)
      sum[j] += pass->recorded_keys_[t * c.n_layers * kv_dim + j];
  std::vector<float> mean(c.n_layers * kv_dim);
  for (int64_t j = 0; j < c.n_layers * kv_dim; ++j)
    mean[j] = static_cast<float>(sum[j] / static_cast<double>(n - 1));
  // The offset: the mean turned by RoPE at each position, averaged.
  const int64_t positions = std::min(limits_.max_context, kRopePositions);
  const kernels::RopeLayout layout = rope_layout();
  std::vector<double> average(kv_dim);
  std::vector<float> turned(kv_dim), cache(c.rope_dims);
  key_offsets_.assign(c.n_layers * kv_dim, 0.0f);
  for (int64_t il = 0; il < c.n_layers; ++il) {
    const kernels::RopeParams rope = rope_params(il);
    std::fill(average.begin(), average.end(), 0.0);
    for (int64_t p = 0; p < positions; ++p) {
      std::copy_n(&mean[il * kv_dim], kv_dim, turned.begin());
      kernels::rope_cache(rope, p, cache.data());
      kernels::rope_apply(isa_, layout, cache.data(), c.rope_dims, turned.data(), c.n_kv_heads,
                          c.head_dim);
      for (int64_t i = 0; i < kv_dim; ++i) average[i] += turned[i];
    }
    for (int64_t i = 0; i < kv_dim; ++i)
      key_offsets_[il * kv_dim + i] =
          static_cast<float>(average[i] / static_cast<double>(positions));
  }
  return Status::Ok();
}

}  // namespace drift
