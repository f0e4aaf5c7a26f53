// The grammar's allowed-token mask and logit_bias, applied before penalties: the word-skipping
// mask against its bit-by-bit reference, and sample_token never drawing what either removes.
#include "sampling/token_mask.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "sampling/sampler.h"
#include "util/token_constraint.h"

namespace drift {
namespace {

bool allowed(const std::vector<uint32_t>& mask, int64_t t) {
  return (mask[size_t(t / 32)] >> (t % 32)) & 1u;
}

// Masks that mix the word shapes apply_token_mask treats apart: all allowed, none, mixed.
std::vector<uint32_t> random_mask(int64_t n_vocab, std::mt19937& rng) {
  std::vector<uint32_t> mask(static_cast<size_t>(token_mask_words(n_vocab)));
  for (uint32_t& w : mask) {
    switch (rng() % 4) {
      case 0:
        w = ~0u;
        break;
      case 1:
        w = 0;
        break;
      case 2:
        w = uint32_t(rng()) & uint32_t(rng());  // sparse
        break;
      default:
        w = uint32_t(rng());
    }
  }
  return mask;
}

TEST(TokenMask, MatchesReferenceOnEveryWordShape) {
  std::mt19937 rng(7);
  for (int64_t n_vocab : {1, 31, 32, 33, 1000, 49152, 49157}) {
    for (int trial = 0; trial < 20; ++trial) {
      const std::vector<uint32_t> mask = random_mask(n_vocab, rng);
      std::vector<float> fast(static_cast<size_t>(n_vocab)),
          reference(static_cast<size_t>(n_vocab));
      for (int64_t t = 0; t < n_vocab; ++t) fast[size_t(t)] = reference[size_t(t)] = float(t % 13);
      apply_token_mask(fast, mask);
      apply_token_mask_reference(reference, mask);
      for (int64_t t = 0; t < n_vocab; ++t) {
        ASSERT_EQ(fast[size_t(t)], reference[size_t(t)]) << "n_vocab " << n_vocab << " token " << t;
        ASSERT_EQ(std::isinf(fast[size_t(t)]), !allowed(mask, t));
      }
    }
  }
}

TEST(TokenMask, ShortMaskAllowsNothingPastItsEnd) {
  std::vector<float> logits(100, 1.0f);
  const std::vector<uint32_t> mask = {~0u};  // tokens 0..31 only
  apply_token_mask(logits, mask);
  EXPECT_EQ(logits[31], 1.0f);
  EXPECT_EQ(logits[32], -INFINITY);
  EXPECT_EQ(logits[99], -INFINITY);
}

TEST(LogitBias, AddsOrBans) {
  std::vector<float> logits = {1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<LogitBias> bias = {{0, 5.0f}, {2, kBanBias}, {3, -1.5f}, {9, 100.0f}};
  apply_logit_bias(logits, bias);
  EXPECT_EQ(logits[0], 6.0f);
  EXPECT_EQ(logits[1], 2.0f);
  EXPECT_EQ(logits[2], -INFINITY);
  EXPECT_EQ(logits[3], 2.5f);
}

class MaskedSampling : public ::testing::Test {
 protected:
  static constexpr int64_t kVocab = 300;
  SamplerScratch scratch{kVocab, best_isa(detect_cpu_features())};
  std::vector<int32_t> history = {5, 6, 7};
  // Token t's logit grows with t, so the unmasked favourite is the last token.
  std::vector<float> fresh_logits() const {
    std::vector<float> l(static_cast<size_t>(kVocab));
    for (int64_t t = 0; t < kVocab; ++t) l[size_t(t)] = float(t) * 0.01f;
    return l;
  }
};

TEST_F(MaskedSampling, NeverDrawsADisallowedToken) {
  std::vector<uint32_t> mask(size_t(token_mask_words(kVocab)), 0);
  for (int32_t t : {3, 40, 77, 200}) mask[size_t(t / 32)] |= 1u << (t % 32);
  SamplingParams p;
  p.temperature = 2.0f;  // flat: every allowed token is drawn some time
  std::vector<int> seen(size_t(kVocab), 0);
  for (uint64_t seed = 0; seed < 400; ++seed) {
    std::vector<float> logits = fresh_logits();
    const int32_t t = sample_token(logits, p, history, 1, seed, scratch, mask);
    ASSERT_TRUE(allowed(mask, t)) << "drew disallowed token " << t;
    ++seen[size_t(t)];
  }
  for (int32_t t : {3, 40, 77, 200}) EXPECT_GT(seen[size_t(t)], 0) << t;
  // Greedy takes the most likely allowed token.
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::vector<float> logits = fresh_logits();
  EXPECT_EQ(sample_token(logits, greedy, history, 1, 0, scratch, mask), 200);
}

TEST_F(MaskedSampling, MaskComesBeforePenalties) {
  // A repetition penalty on a disallowed token must not bring it back (-inf * p stays -inf).
  std::vector<uint32_t> mask(size_t(token_mask_words(kVocab)), 0);
  mask[0] = 1u << 5;  // only token 5, which is in the history
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  p.presence_penalty = 2.0f;
  std::vector<float> logits = fresh_logits();
  EXPECT_EQ(sample_token(logits, p, history, 1, 3, scratch, mask), 5);
}

TEST_F(MaskedSampling, LogitBiasBansAndFavours) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.logit_bias = {{int32_t(kVocab - 1), kBanBias}};
  std::vector<float> logits = fresh_logits();
  EXPECT_EQ(sample_token(logits, greedy, history, 1, 0, scratch), kVocab - 2);
  SamplingParams favour;
  favour.logit_bias = {{10, 100.0f}};
  for (uint64_t seed = 0; seed < 50; ++seed) {
    logits = fresh_logits();
    EXPECT_EQ(sample_token(logits, favour, history, 1, seed, scratch), 10);
  }
}

TEST(SamplingParamsLogitBias, ValidateBoundsEntriesAndValues) {
  SamplingParams p;
  p.logit_bias = {{1, 100.0f}, {2, -100.0f}};
  EXPECT_TRUE(p.validate().ok());
  p.logit_bias = {{1, 100.5f}};
  EXPECT_NE(p.validate().message().find("[-100, 100]"), std::string::npos);
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_FALSE(p.validate().ok());
  p.logit_bias.assign(kMaxLogitBias + 1, LogitBias{1, 1.0f});
  EXPECT_NE(p.validate().message().find("at most 1024"), std::string::npos);
}

}  // namespace
}  // namespace drift
