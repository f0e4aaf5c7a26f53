// --spec auto's gate: it runs drafts where the steps with them commit more tokens per second than
// the steps without, stops them where they do not, judges each batch size apart, and follows a
// change in which pays; on the fake executor, the drafts it stops leave the output unchanged.
#include "scheduler/spec_auto_gate.h"

#include <gtest/gtest.h>

#include <functional>

#include "fake_executor.h"
#include "scheduler/engine_scheduler.h"

namespace drift {
namespace {

using testing::Driver;
using testing::FakeModel;
using testing::make_request;

// A machine and text, as the gate sees them: one decode step's tokens and seconds per arm.
struct Arm {
  double tokens_per_sequence;
  double seconds;
};

// Runs `steps` decode steps of `decoding` sequences; returns the fraction that allowed drafts.
double fraction_with_drafts(SpecAutoGate& gate, int32_t decoding, Arm with, Arm without,
                            int steps) {
  int with_drafts = 0;
  for (int i = 0; i < steps; ++i) {
    const bool drafts = gate.drafts_allowed(decoding);
    with_drafts += drafts;
    const Arm& arm = drafts ? with : without;
    gate.observe(decoding, int64_t(arm.tokens_per_sequence * decoding + 0.5), arm.seconds);
  }
  return double(with_drafts) / steps;
}

// Drafts that are half rejected on a step bound by compute (SmolLM2 on a fast CPU): each step
// with them costs more than the tokens it adds.
constexpr Arm kCostlyDrafts{1.3, 0.0042};
constexpr Arm kCheapDrafts{2.5, 0.0125};  // a step bound by memory (Gemma 3): nearly free
constexpr Arm kPlain{1.0, 0.0028};
constexpr Arm kPlainSlow{1.0, 0.0118};

// The other arm is measured one block in every kExploreEvery + 1.
constexpr double kExploreShare = 1.0 / (SpecAutoGate::kExploreEvery + 1);

// A batch size not measured yet runs without drafts, whatever the others learned: speculation
// must cost nothing where the gate has no figures (steps that also prefill are never measured).
TEST(SpecAutoGate, AnUnmeasuredBatchSizeRunsWithoutDrafts) {
  SpecAutoGate gate;
  for (int32_t decoding : {1, 2, 4, 16, 64}) EXPECT_FALSE(gate.drafts_allowed(decoding));
  for (int i = 0; i < 4 * SpecAutoGate::kBlockSteps; ++i) gate.observe(1, 3, 0.01);
  EXPECT_FALSE(gate.drafts_allowed(16)) << "batch size 16 has not been measured";
}

TEST(SpecAutoGate, DraftsStopWhereStepsWithThemCommitFewerTokensPerSecond) {
  SpecAutoGate gate;
  fraction_with_drafts(gate, 1, kCostlyDrafts, kPlain, 64);  // both arms measured
  EXPECT_LE(fraction_with_drafts(gate, 1, kCostlyDrafts, kPlain, 720), kExploreShare + 0.01);
  EXPECT_GT(gate.rate(1, false), gate.rate(1, true));
}

TEST(SpecAutoGate, DraftsRunWhereTheyPay) {
  SpecAutoGate gate;
  fraction_with_drafts(gate, 1, kCheapDrafts, kPlainSlow, 64);
  EXPECT_GE(fraction_with_drafts(gate, 1, kCheapDrafts, kPlainSlow, 720), 1 - kExploreShare - 0.01);
}

TEST(SpecAutoGate, EachBatchSizeIsJudgedApart) {
  SpecAutoGate gate;
  for (int round = 0; round < 20; ++round) {
    fraction_with_drafts(gate, 1, kCheapDrafts, kPlainSlow, 16);
    fraction_with_drafts(gate, 12, kCostlyDrafts, kPlain, 16);
  }
  EXPECT_GT(fraction_with_drafts(gate, 1, kCheapDrafts, kPlainSlow, 72), 0.8);
  EXPECT_LT(fraction_with_drafts(gate, 12, kCostlyDrafts, kPlain, 72), 0.2);
  EXPECT_EQ(gate.rate(3, true), 0) << "a batch of 3 has not been measured";
}

TEST(SpecAutoGate, ItFollowsAChangeOfTextOrLoad) {
  SpecAutoGate gate;
  fraction_with_drafts(gate, 1, kCostlyDrafts, kPlain, 400);
  ASSERT_FALSE(gate.drafts_allowed(1));
  // The text turns repetitive: drafts now pay. Within a few exploration rounds they run again.
  const int rounds = 3 * (SpecAutoGate::kExploreEvery + 1) * SpecAutoGate::kBlockSteps;
  fraction_with_drafts(gate, 1, Arm{3.0, 0.0042}, kPlain, rounds);
  EXPECT_GE(fraction_with_drafts(gate, 1, Arm{3.0, 0.0042}, kPlain, 720), 1 - kExploreShare - 0.01);
}

SchedulerConfig auto_config() {
  SchedulerConfig c;
  c.max_num_batched_tokens = 64;
  c.max_num_seqs = 8;
  c.max_model_len = 512;
  c.spec.mode = SpecMode::kAuto;
  return c;
}

// On the fake executor with a fake clock: a step's seconds grow with its tokens (bound by compute),
// so drafts that are often rejected lose, the gate stops them, and every output is still that of
// one token a step.
TEST(SpecAutoGate, TheSchedulerStopsDraftsThatCostMoreThanTheySaveAndOutputIsUnchanged) {
  Driver d(auto_config(), 256, 4, FakeModel{.vocab = 12, .eos = 0, .order = 3}, {});
  d.submit(make_request(1, 10, 400));
  while (d.scheduler().has_unfinished()) {
    const StepPlan plan = d.step();
    d.scheduler().observe_step_seconds(0.001 * plan.num_tokens());
  }
  EXPECT_EQ(d.records().at(1).generated, d.reference(1));
  const SchedulerStats& s = d.scheduler().stats();
  EXPECT_GT(s.spec_auto_steps_with_drafts, 0u) << "drafts were measured";
  EXPECT_GT(s.spec_auto_steps_without_drafts, 3 * s.spec_auto_steps_with_drafts);
}

// The same with a step's seconds fixed (bound by reading the weights): drafts are nearly free.
// The model's output takes ~70 tokens to start repeating, with nothing to draft before (both arms
// tie, and ties go to no drafts); from then on the gate lets drafts run, and most tokens come
// from accepted drafts.
TEST(SpecAutoGate, TheSchedulerKeepsDraftsWhereStepsCostTheSameWithThem) {
  Driver d(auto_config(), 256, 4, FakeModel{.vocab = 12, .eos = 0, .order = 3}, {});
  d.submit(make_request(1, 10, 400));
  while (d.scheduler().has_unfinished()) {
    d.step();
    d.scheduler().observe_step_seconds(0.004);
  }
  EXPECT_EQ(d.records().at(1).generated, d.reference(1));
  const SchedulerStats& s = d.scheduler().stats();
  EXPECT_GT(s.spec_accepted_tokens, 200u) << "of 400 tokens";
}

}  // namespace
}  // namespace drift
