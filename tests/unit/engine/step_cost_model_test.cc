// The step cost model learns the costs of a synthetic clock: steps whose times are a known
// linear function of their shape (plus noise), as an executor on a steady machine would show.
#include "engine/step_cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace drift {
namespace {

// A synthetic executor clock: the true costs, and a random mix of steps.
struct SyntheticClock {
  StepCosts truth;
  std::mt19937_64 rng{42};
  double noise = 0;  // relative, uniform in [-noise, noise]

  StepShape random_shape() {
    StepShape s;
    const int kind = int(rng() % 3);  // prefill only, decode only, mixed
    if (kind != 1) s.prefill_tokens = 1 + int64_t(rng() % 2048);
    if (kind != 0) s.decode_sequences = 1 + int64_t(rng() % 32);
    const int64_t context = int64_t(rng() % 3000);
    s.attended_positions = s.decode_sequences * (context + 1) + s.prefill_tokens * context +
                           s.prefill_tokens * (s.prefill_tokens + 1) / 2;
    return s;
  }
  double seconds(const StepShape& s) {
    std::uniform_real_distribution<double> u(-noise, noise);
    return truth.seconds(s) * (1 + u(rng));
  }
};

// CPU-like costs: 1 ms per step, 0.5 ms per prefill token, 0.3 ms per decode sequence, 2 ns per
// attended position.
constexpr StepCosts kTruth{1e-3, 5e-4, 3e-4, 2e-9};

TEST(StepCostModel, UncalibratedUntilItHasSeenPrefillAndDecodeSteps) {
  StepCostModel model;
  EXPECT_FALSE(model.calibrated());
  EXPECT_EQ(model.predict(StepShape{100, 4, 1000}), 0);
  model.observe(StepShape{100, 0, 5050}, 0.05);
  model.observe(StepShape{200, 0, 20100}, 0.10);
  EXPECT_FALSE(model.calibrated()) << "no decode step seen";
  model.observe(StepShape{0, 4, 400}, 0.002);
  EXPECT_TRUE(model.calibrated());
  model.observe(StepShape{0, 8, 800}, 0.003);
  model.observe(StepShape{10, 1, 10}, -1.0);  // ignored: not a time
  model.observe(StepShape{10, 1, 10}, std::nan(""));
  EXPECT_EQ(model.steps_observed(), 4u);
}

TEST(StepCostModel, ConvergesToTheCostsOfASyntheticClock) {
  SyntheticClock clock{kTruth};
  StepCostModel model;
  for (int i = 0; i < 200; ++i) {
    StepShape s = clock.random_shape();
    model.observe(s, clock.seconds(s));
  }
  ASSERT_TRUE(model.calibrated());
  const StepCosts& c = model.costs();
  EXPECT_NEAR(c.per_step, kTruth.per_step, 1e-3 * kTruth.per_step);
  EXPECT_NEAR(c.per_prefill_token, kTruth.per_prefill_token, 1e-3 * kTruth.per_prefill_token);
  EXPECT_NEAR(c.per_decode_sequence, kTruth.per_decode_sequence, 1e-3 * kTruth.per_decode_sequence);
  EXPECT_NEAR(c.per_attended_position, kTruth.per_attended_position,
              1e-3 * kTruth.per_attended_position);
  for (int i = 0; i < 100; ++i) {
    StepShape s = clock.random_shape();
    EXPECT_NEAR(model.predict(s), kTruth.seconds(s), 1e-3 * kTruth.seconds(s));
  }
}

TEST(StepCostModel, PredictsWithinTheNoiseOfANoisyClock) {
  SyntheticClock clock{kTruth};
  clock.noise = 0.10;
  StepCostModel model;
  for (int i = 0; i < 300; ++i) {
    StepShape s = clock.random_shape();
    model.observe(s, clock.seconds(s));
  }
  // Zero-mean noise of ±10% averages out over the ~33 steps of effective memory: predictions
  // land within a few percent of the true cost, and no cost goes negative.
  for (int i = 0; i < 100; ++i) {
    StepShape s = clock.random_shape();
    EXPECT_NEAR(model.predict(s), kTruth.seconds(s), 0.05 * kTruth.seconds(s));
  }
  const StepCosts& c = model.costs();
  EXPECT_GE(c.per_step, 0);
  EXPECT_GE(c.per_attended_position, 0);
}

TEST(StepCostModel, FollowsAMachineThatSlowsDown) {
  SyntheticClock clock{kTruth};
  StepCostModel model;
  for (int i = 0; i < 100; ++i) {
    StepShape s = clock.random_shape();
    model.observe(s, clock.seconds(s));
  }
  // Another process takes half the machine: every cost doubles.
  clock.truth = StepCosts{2e-3, 1e-3, 6e-4, 4e-9};
  for (int i = 0; i < 300; ++i) {
    StepShape s = clock.random_shape();
    model.observe(s, clock.seconds(s));
  }
  const StepShape typical{512, 16, 16 * 1000 + 512 * 1000 + 512 * 513 / 2};
  EXPECT_NEAR(model.predict(typical), clock.truth.seconds(typical),
              0.01 * clock.truth.seconds(typical));
}

TEST(StepCostModel, AfterOneShortPrefillALongPromptCostsItsTokensNotTheirSquare) {
  // What a server sees first: a warm-up of 51 prompt tokens, then its decodes. That one prefill
  // step could be explained by attention (51 * 52 / 2 positions) as well as by tokens; taking
  // the quadratic would predict a 600-token prompt at ~40 s instead of ~3.3 s.
  const StepCosts truth{0.015, 0.0055, 0.005, 0};
  StepCostModel model;
  model.observe(StepShape{51, 0, 51 * 52 / 2}, truth.seconds(StepShape{51, 0, 0}));
  // Decode times jitter (here: drift upwards by 0.3 ms a step as the context grows by one), which
  // attention could "explain" too.
  for (int i = 0; i < 7; ++i)
    model.observe(StepShape{0, 1, 52 + i}, truth.seconds(StepShape{0, 1, 0}) + 3e-4 * i);
  ASSERT_TRUE(model.calibrated());
  const StepShape prompt{600, 0, 600 * 601 / 2};
  EXPECT_NEAR(model.predict(prompt), truth.seconds(prompt), 0.1 * truth.seconds(prompt));
}

TEST(StepCostModel, NeverLearnsANegativeCost) {
  // Steps whose time does not grow with attended positions (a tiny model): the unconstrained fit
  // could give a negative cost per position to explain noise; the constrained one gives 0.
  StepCostModel model;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100; ++i) {
    StepShape s{int64_t(rng() % 500), int64_t(1 + rng() % 8), int64_t(rng() % 1000000)};
    double t = 1e-3 + 1e-4 * double(s.prefill_tokens) + 2e-4 * double(s.decode_sequences);
    model.observe(s, t * (1 + 0.01 * double(int(rng() % 3) - 1)));
  }
  const StepCosts& c = model.costs();
  EXPECT_GE(c.per_step, 0);
  EXPECT_GE(c.per_prefill_token, 0);
  EXPECT_GE(c.per_decode_sequence, 0);
  EXPECT_GE(c.per_attended_position, 0);
  EXPECT_NEAR(c.per_prefill_token, 1e-4, 1e-5);
}

}  // namespace
}  // namespace drift
