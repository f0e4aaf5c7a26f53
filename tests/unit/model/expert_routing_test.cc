// Routing of a mixture-of-experts layer (model/expert_routing.h) against values computed by hand:
// llama.cpp's two gating orders, its tie and renormalisation rules, and the grouping of a step's
// assignments by expert.
#include "model/expert_routing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace drift {
namespace {

TEST(RouteToken, SoftmaxThenTopKKeepsTheLargestProbabilitiesRenormalised) {
  const float logits[] = {1.0f, 3.0f, 2.0f, 0.0f};
  int32_t experts[2];
  float weights[2];
  route_token(logits, 4, 2, ExpertGating::kSoftmaxThenTopK, /*normalize=*/true, experts, weights);
  EXPECT_EQ(experts[0], 1);
  EXPECT_EQ(experts[1], 2);
  // Renormalised over the two kept: e^3 / (e^3 + e^2) and e^2 / (e^3 + e^2).
  EXPECT_NEAR(weights[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(weights[1], 1.0 / (1.0 + std::exp(1.0)), 1e-6);
}

TEST(RouteToken, WithoutRenormalisationTheWeightsAreTheFullSoftmaxProbabilities) {
  const float logits[] = {1.0f, 3.0f, 2.0f, 0.0f};
  int32_t experts[2];
  float weights[2];
  route_token(logits, 4, 2, ExpertGating::kSoftmaxThenTopK, /*normalize=*/false, experts, weights);
  const double sum = std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + 1.0;
  EXPECT_NEAR(weights[0], std::exp(3.0) / sum, 1e-6);
  EXPECT_NEAR(weights[1], std::exp(2.0) / sum, 1e-6);
}

TEST(RouteToken, TopKThenSoftmaxNormalisesOverTheChosenLogitsOnly) {
  const float logits[] = {-1.0f, 0.5f, 4.0f, 0.25f, 3.0f};
  int32_t experts[3];
  float weights[3];
  route_token(logits, 5, 3, ExpertGating::kTopKThenSoftmax, false, experts, weights);
  EXPECT_EQ(experts[0], 2);
  EXPECT_EQ(experts[1], 4);
  EXPECT_EQ(experts[2], 1);
  const double sum = std::exp(4.0) + std::exp(3.0) + std::exp(0.5);
  EXPECT_NEAR(weights[0], std::exp(4.0) / sum, 1e-6);
  EXPECT_NEAR(weights[1], std::exp(3.0) / sum, 1e-6);
  EXPECT_NEAR(weights[2], std::exp(0.5) / sum, 1e-6);
}

TEST(RouteToken, TiesGoToTheLowerExpertId) {
  const float logits[] = {0.0f, 2.0f, 1.0f, 2.0f, 1.0f};
  int32_t experts[3];
  float weights[3];
  route_token(logits, 5, 3, ExpertGating::kSoftmaxThenTopK, true, experts, weights);
  EXPECT_EQ(experts[0], 1);
  EXPECT_EQ(experts[1], 3);
  EXPECT_EQ(experts[2], 2);
  EXPECT_EQ(weights[0], weights[1]);
}

TEST(GroupByExpert, OrdersAssignmentsByExpertThenToken) {
  // 3 tokens, k = 2: token 0 -> experts 2, 0; token 1 -> 2, 1; token 2 -> 0, 2. Expert 3 unused.
  const std::vector<int32_t> experts = {2, 0, 2, 1, 0, 2};
  std::vector<int32_t> offsets(5), order(6), rank(6);
  group_by_expert(experts, 4, ExpertGroups{offsets, order, rank});
  EXPECT_EQ(offsets, (std::vector<int32_t>{0, 2, 3, 6, 6}));
  EXPECT_EQ(order, (std::vector<int32_t>{1, 4, 3, 0, 2, 5}));
  EXPECT_EQ(rank, (std::vector<int32_t>{3, 0, 4, 2, 1, 5}));
}

}  // namespace
}  // namespace drift
