#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sampling/random_stream.h"

namespace drift {
namespace {

int32_t sample(std::vector<float> logits, const SamplingParams& p,
               std::vector<int32_t> history = {}, int64_t prompt_len = 0, uint64_t seed = 1) {
  SamplerScratch scratch(static_cast<int64_t>(logits.size()), Isa::kScalar);
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

// Greedy decoding with the ISA the executor hands the scratch: after penalties, on a row long
// enough for the SIMD lanes.
TEST(Sampler, GreedyOnEveryIsaPicksThePenalisedMaximum) {
  std::vector<float> base(1000, 0.0f);
  base[700] = 3.0f;  // the largest logit, but in the history
  base[900] = 2.0f;
  SamplingParams p = greedy();
  p.repetition_penalty = 2.0f;
  const std::vector<int32_t> history = {700};
  for (Isa isa : supported_isas(detect_cpu_features())) {
    std::vector<float> logits = base;
    SamplerScratch scratch(static_cast<int64_t>(logits.size()), isa);
    EXPECT_EQ(sample_token(logits, p, history, 1, 1, scratch), 900) << static_cast<int>(isa);
  }
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
  // 4000 equally likely tokens (ties ordered by id): top_p 0.9 must keep ids 0..3599, far more
  // than the 512 the first partial sort orders. Kept uniformly, 3088/3600 of the draws land in
  // 512..3599; a nucleus cut at the partial-sort size would put none there.
  SamplingParams p;
  p.top_p = 0.9f;
  std::vector<float> flat(4000, 1.0f);
  const int N = 2000;
  int beyond = 0, past_first_sort = 0;
  for (int seed = 0; seed < N; ++seed) {
    const int32_t id = sample(flat, p, {}, 0, seed);
    beyond += id >= 3600;
    past_first_sort += id >= 512 && id < 3600;
  }
  EXPECT_EQ(beyond, 0);
  const double share = 3088.0 / 3600.0;
  EXPECT_NEAR(past_first_sort, N * share, 5 * std::sqrt(N * share * (1 - share)));
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplingParams p;
  p.min_p = 0.2f;  // threshold 0.2 * 0.6 = 0.12: drops the 0.1 token
  std::vector<float> logits = {std::log(0.6f), std::log(0.3f), std::log(0.1f)};
  for (int seed = 0; seed < 3000; ++seed) EXPECT_NE(sample(logits, p, {}, 0, seed), 2);
}

// Empirical frequencies of `N` draws (one stream per seed) are each within 5 binomial standard
// deviations of the hand-computed `want` (tokens absent from `want` must never be drawn).
void expect_distribution(const std::vector<float>& logits, const SamplingParams& p,
                         const std::vector<double>& want) {
  const int N = 20000;
  std::vector<int> counts(logits.size(), 0);
  for (int seed = 0; seed < N; ++seed) counts[size_t(sample(logits, p, {}, 0, seed))] += 1;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double q = i < want.size() ? want[i] : 0.0;
    if (q == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " is outside the kept set";
    } else {
      EXPECT_NEAR(counts[i], N * q, 5 * std::sqrt(N * q * (1 - q))) << "token " << i;
    }
  }
}

std::vector<float> log_probs(const std::vector<float>& probs) {
  std::vector<float> logits;
  for (float q : probs) logits.push_back(std::log(q));
  return logits;
}

TEST(Sampler, TopKRenormalisesOverTheKMostLikely) {
  SamplingParams p;
  p.top_k = 2;  // [0.5, 0.3] of [0.5, 0.3, 0.15, 0.05] -> [0.625, 0.375]
  expect_distribution(log_probs({0.5f, 0.3f, 0.15f, 0.05f}), p, {0.625, 0.375});
}

TEST(Sampler, DefaultOrderCutsTopPBeforeTheTemperature) {
  // llama.cpp's order: top_p 0.75 on [0.5, 0.3, 0.15, 0.05] keeps tokens 0 and 1 (0.5 < 0.75 <=
  // 0.8), then temperature 2 takes square roots: sqrt(.5) : sqrt(.3) = 0.5635 : 0.4365.
  SamplingParams p;
  p.top_p = 0.75f;
  p.temperature = 2.0f;
  expect_distribution(log_probs({0.5f, 0.3f, 0.15f, 0.05f}), p, {0.5635, 0.4365});
}

TEST(Sampler, TemperatureFirstCutsTopPOnTheTemperedDistribution) {
  // Temperature 2 first: sqrt of [0.5, 0.3, 0.15, 0.05] = [.7071, .5477, .3873, .2236] / 1.8657
  // = [.3790, .2936, .2076, .1199]; top_p 0.75 then needs three tokens (.6726 < .75 <= .8802),
  // renormalised: [.4306, .3335, .2359].
  SamplingParams p;
  p.top_p = 0.75f;
  p.temperature = 2.0f;
  p.order.stages = {SamplerStage::kTemperature, SamplerStage::kTopK, SamplerStage::kTopP,
                    SamplerStage::kMinP};
  expect_distribution(log_probs({0.5f, 0.3f, 0.15f, 0.05f}), p, {0.4306, 0.3335, 0.2359});
}

TEST(Sampler, MinPMeasuresTheDistributionAtItsPlaceInTheOrder) {
  // [0.6, 0.3, 0.1], min_p 0.2: before the temperature the threshold is 0.12, so token 2 goes;
  // temperature 3 first flattens them to cube roots [.8434, .6694, .4642], and .4642 >= 0.2 *
  // .8434 keeps all three: [.4211, .3342, .2318].
  const std::vector<float> logits = log_probs({0.6f, 0.3f, 0.1f});
  SamplingParams p;
  p.min_p = 0.2f;
  p.temperature = 3.0f;
  const double a = std::cbrt(0.6), b = std::cbrt(0.3);
  expect_distribution(logits, p, {a / (a + b), b / (a + b)});
  p.order.stages = {SamplerStage::kTemperature, SamplerStage::kTopK, SamplerStage::kTopP,
                    SamplerStage::kMinP};
  expect_distribution(logits, p, {0.4211, 0.3342, 0.2318});
}

TEST(Sampler, TheFourFiltersChainInTheDefaultOrder) {
  // [.35, .25, .2, .1, .06, .04]: top_k 4 keeps 0..3 (mass .9); top_p .75 of that (.675) needs
  // 0..2 (.6 < .675 <= .8); min_p .6 of the best (.21) drops token 2 (.2); temperature .5
  // squares the rest: [.1225, .0625] / .185 = [.6622, .3378].
  SamplingParams p;
  p.top_k = 4;
  p.top_p = 0.75f;
  p.min_p = 0.6f;
  p.temperature = 0.5f;
  expect_distribution(log_probs({0.35f, 0.25f, 0.2f, 0.1f, 0.06f, 0.04f}), p, {0.6622, 0.3378});
}

TEST(Sampler, PenaltyLastNLimitsThePenaltiesToTheRecentHistory) {
  SamplingParams p = greedy();
  p.repetition_penalty = 4.0f;
  // Token 0 (logit 3) is in the history but more than 2 tokens back: not penalised.
  p.penalty_last_n = 2;
  EXPECT_EQ(sample({3.0f, 2.0f, 0.0f}, p, {0, 2, 2}, 3), 0);
  // Within the window it is: 3 / 4 < 2.
  EXPECT_EQ(sample({3.0f, 2.0f, 0.0f}, p, {2, 2, 0}, 3), 1);
  // 0 turns the penalties off; -1 looks at the whole history.
  p.penalty_last_n = 0;
  EXPECT_EQ(sample({3.0f, 2.0f, 0.0f}, p, {2, 2, 0}, 3), 0);
  p.penalty_last_n = -1;
  EXPECT_EQ(sample({3.0f, 2.0f, 0.0f}, p, {0, 2, 2}, 3), 1);
}

TEST(SamplerOrder, NamesFollowLlamaCpp) {
  EXPECT_EQ(sampler_order_string(SamplerOrder{}), "top_k;top_p;min_p;temperature");
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
