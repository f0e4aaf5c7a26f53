// Sampling a token with every filter on allocates nothing once the scratch exists: the decode
// step's zero-allocation promise covers the sampler (top-k, the extended top-p sort, min-p).
#include <gtest/gtest.h>

#include <vector>

#include "counting_allocator.h"
#include "sampling/sampler.h"
#include "util/token_constraint.h"

namespace drift {
namespace {

TEST(SamplerAllocation, NoHeapAllocationPerToken) {
  const int64_t n_vocab = 5000;
  SamplerScratch scratch(n_vocab, best_isa(detect_cpu_features()));
  std::vector<float> base(n_vocab);
  for (int64_t i = 0; i < n_vocab; ++i) base[size_t(i)] = float(i % 97) * 0.01f;
  std::vector<float> logits = base;
  std::vector<int32_t> history = {1, 2, 3, 2, 1};

  SamplingParams with_top_k;
  with_top_k.top_k = 40;
  with_top_k.top_p = 0.95f;
  with_top_k.min_p = 0.05f;
  with_top_k.temperature = 0.8f;
  with_top_k.repetition_penalty = 1.1f;
  with_top_k.frequency_penalty = 0.5f;
  SamplingParams wide_nucleus;  // top-p over a nearly flat vocabulary: sorts past 512 tokens
  wide_nucleus.top_p = 0.99f;
  wide_nucleus.min_p = 0.001f;

  g_allocations = 0;
  g_counting = true;
  int32_t sum = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    for (const SamplingParams* p : {&with_top_k, &wide_nucleus}) {
      std::copy(base.begin(), base.end(), logits.begin());
      sum += sample_token(logits, *p, history, 2, seed, scratch);
    }
  }
  g_counting = false;
  EXPECT_EQ(g_allocations.load(), 0u);
  EXPECT_GE(sum, 0);
}

// A constrained draw (grammar mask, logit_bias) allocates nothing either: the mask is the
// executor's per-thread buffer and the biases are the request's own.
TEST(SamplerAllocation, NoHeapAllocationWithMaskAndLogitBias) {
  const int64_t n_vocab = 5000;
  SamplerScratch scratch(n_vocab, best_isa(detect_cpu_features()));
  std::vector<float> base(n_vocab);
  for (int64_t i = 0; i < n_vocab; ++i) base[size_t(i)] = float(i % 97) * 0.01f;
  std::vector<float> logits = base;
  std::vector<uint32_t> mask(size_t(token_mask_words(n_vocab)), 0x0F0F00FFu);
  std::vector<int32_t> history = {1, 2, 3, 2, 1};
  SamplingParams p;
  p.top_k = 40;
  p.top_p = 0.9f;
  p.repetition_penalty = 1.1f;
  p.logit_bias = {{4, 3.0f}, {8, kBanBias}, {4999, -20.0f}};

  g_allocations = 0;
  g_counting = true;
  int32_t sum = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::copy(base.begin(), base.end(), logits.begin());
    sum += sample_token(logits, p, history, 2, seed, scratch, mask);
  }
  g_counting = false;
  EXPECT_EQ(g_allocations.load(), 0u);
  EXPECT_GE(sum, 0);
}

}  // namespace
}  // namespace drift
