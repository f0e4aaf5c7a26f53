#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sampling/random_stream.h"

namespace drift {
namespace {

int32_t sample(std::vector<float> logits, const SamplingParams& p,
               std::vector<int32_t> history = {}, int64_t prompt_len = 0, uint64_t seed = 1) {
  SamplerScratch scratch(static_cast<int64_t>(logits.size()));
  return sample_token(logits, p, history, prompt_len, seed, scratch);
}

SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

TEST(Sampler, GreedyPicksTheLargestLogitAndTheLowestIdOnTies) {
  EXPECT_EQ(sample({0.1f, 2.0f, -1.0f, 2.0f}, greedy()), 1);
  EXPECT_EQ(sample({-3.0f, -2.0f, -5.0f}, greedy()), 1);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams p = greedy();
  p.repetition_penalty = 2.0f;
  // Token 0 (logit 3) appears in the prompt: 3 / 2 = 1.5 < 2, so token 1 wins.
  EXPECT_EQ(sample({3.0f, 2.0f, -1.0f}, p, {0}, 1), 1);
  // Negative logits move further down: -1 * 2 = -2 < -1.5.
  EXPECT_EQ(sample({-1.0f, -1.5f}, p, {0}, 1), 1);
  // Without the penalty token 0 wins.
  EXPECT_EQ(sample({3.0f, 2.0f, -1.0f}, greedy(), {0}, 1), 0);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesCountOnlyGeneratedTokens) {
  SamplingParams p = greedy();
  p.frequency_penalty = 0.6f;
  // Token 0 in the prompt only: no penalty.
  EXPECT_EQ(sample({2.0f, 1.0f}, p, {0, 0, 0}, 3), 0);
  // Token 0 generated twice: 2 - 2 * 0.6 = 0.8 < 1.
  EXPECT_EQ(sample({2.0f, 1.0f}, p, {1, 0, 0}, 1), 1);
  SamplingParams q = greedy();
  q.presence_penalty = 1.5f;
  EXPECT_EQ(sample({2.0f, 1.0f}, q, {0}, 0), 1);  // 2 - 1.5 = 0.5
}

TEST(Sampler, TopKOneIsGreedyWhateverTheSeed) {
  SamplingParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  for (uint64_t seed = 0; seed < 50; ++seed)
    EXPECT_EQ(sample({0.0f, 0.5f, 0.4f, -2.0f}, p, {}, 0, seed), 1);
}

TEST(Sampler, SameSeedAndIndexGiveTheSameTokenDifferentIndexMayDiffer) {
  SamplingParams p;
  std::vector<float> flat(1000, 0.0f);
  int32_t a = sample(flat, p, {5, 6, 7}, 1, 42);
  int32_t b = sample(flat, p, {5, 6, 7}, 1, 42);
  EXPECT_EQ(a, b);
  int differing = 0;
  for (int extra = 0; extra < 20; ++extra) {
    std::vector<int32_t> history(3 + extra, 5);
    differing += sample(flat, p, history, 1, 42) != a;
  }
  EXPECT_GE(differing, 15);  // 1000 equally likely tokens: a repeat has probability 1/1000
}

TEST(Sampler, DrawsFollowTheTemperedDistribution) {
  // softmax([log 1, log 2, log 7]) = [0.1, 0.2, 0.7]; with temperature 1 the empirical
  // frequencies over N independent streams are within 5 binomial standard deviations.
  SamplingParams p;
  std::vector<float> logits = {std::log(1.0f), std::log(2.0f), std::log(7.0f)};
  const int N = 20000;
  int counts[3] = {};
  for (int seed = 0; seed < N; ++seed) counts[sample(logits, p, {}, 0, seed)] += 1;
  const double expected[3] = {0.1, 0.2, 0.7};
  for (int i = 0; i < 3; ++i) {
    double sd = std::sqrt(N * expected[i] * (1 - expected[i]));
    EXPECT_NEAR(counts[i], N * expected[i], 5 * sd) << "token " << i;
  }
  // Temperature 0.5 squares the odds: [1, 4, 49] / 54.
  p.temperature = 0.5f;
  int hot = 0;
  for (int seed = 0; seed < N; ++seed) hot += sample(logits, p, {}, 0, seed) == 2;
  double p2 = 49.0 / 54.0;
  EXPECT_NEAR(hot, N * p2, 5 * std::sqrt(N * p2 * (1 - p2)));
}

TEST(Sampler, TopPNeverSamplesOutsideTheNucleus) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: top_p 0.75 keeps the first two only.
  SamplingParams p;
  p.top_p = 0.75f;
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  int counts[4] = {};
  for (int seed = 0; seed < 5000; ++seed) counts[sample(logits, p, {}, 0, seed)] += 1;
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_GT(counts[1], 1500);  // renormalised 0.375 of 5000
}

TEST(Sampler, TopPOverALargeFlatVocabularySortsBeyondThePartialPrefix) {
  // 4000 equally likely tokens: top_p 0.9 must keep 3600 of them, more than the partial sort
  // looks at first.
  SamplingParams p;
  p.top_p = 0.9f;
  std::vector<float> flat(4000, 1.0f);
  int beyond = 0;
  for (int seed = 0; seed < 2000; ++seed) beyond += sample(flat, p, {}, 0, seed) >= 3600;
  EXPECT_EQ(beyond, 0);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplingParams p;
  p.min_p = 0.2f;  // threshold 0.2 * 0.6 = 0.12: drops the 0.1 token
  std::vector<float> logits = {std::log(0.6f), std::log(0.3f), std::log(0.1f)};
  for (int seed = 0; seed < 3000; ++seed) EXPECT_NE(sample(logits, p, {}, 0, seed), 2);
}

TEST(RandomStream, UniformIsInUnitIntervalAndDependsOnBothInputs) {
  for (uint64_t c = 0; c < 1000; ++c) {
    double u = stream_uniform(7, c);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
  EXPECT_NE(stream_bits(1, 0), stream_bits(2, 0));
  EXPECT_NE(stream_bits(1, 0), stream_bits(1, 1));
  EXPECT_EQ(stream_bits(1, 5), stream_bits(1, 5));
}

}  // namespace
}  // namespace drift
