#include "sampling/logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace drift {
namespace {

TEST(TokenLogprobs, LogSoftmaxAtTheTokenAndTopAlternativesDescending) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
  double z = 0;
  for (float x : logits) z += std::exp(double(x));
  TokenLogprobs out;
  compute_token_logprobs(logits, 2, 3, out);
  EXPECT_NEAR(out.logprob, 2.0 - std::log(z), 1e-6);
  ASSERT_EQ(out.num_top, 3);
  EXPECT_EQ(out.top_ids[0], 1);  // ties: the lower id first
  EXPECT_EQ(out.top_ids[1], 3);
  EXPECT_EQ(out.top_ids[2], 2);
  EXPECT_NEAR(out.top_logprobs[0], 3.0 - std::log(z), 1e-6);
  EXPECT_NEAR(out.top_logprobs[2], 2.0 - std::log(z), 1e-6);
}

TEST(TokenLogprobs, ProbabilitiesOfAllTokensSumToOne) {
  std::vector<float> logits(5);
  for (int i = 0; i < 5; ++i) logits[i] = float(i) * 0.7f - 1.0f;
  TokenLogprobs out;
  compute_token_logprobs(logits, 0, 5, out);
  double total = 0;
  for (int i = 0; i < out.num_top; ++i) total += std::exp(double(out.top_logprobs[i]));
  EXPECT_NEAR(total, 1.0, 1e-6);
}

TEST(TokenLogprobs, ZeroAlternativesAndHugeLogitsStayFinite) {
  std::vector<float> logits(50000, -1e30f);
  logits[123] = 1e30f;
  TokenLogprobs out;
  compute_token_logprobs(logits, 123, 0, out);
  EXPECT_EQ(out.num_top, 0);
  EXPECT_FLOAT_EQ(out.logprob, 0.0f);
  compute_token_logprobs(logits, 7, kMaxTopLogprobs + 5, out);  // clamped to the limit
  EXPECT_EQ(out.num_top, kMaxTopLogprobs);
  EXPECT_EQ(out.top_ids[0], 123);
}

}  // namespace
}  // namespace drift
