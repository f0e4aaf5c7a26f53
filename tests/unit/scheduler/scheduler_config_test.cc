#include "scheduler/scheduler_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

namespace drift {
namespace {

std::string error_of(const std::function<void(SchedulerConfig&)>& change) {
  SchedulerConfig c;
  change(c);
  Status s = c.validate();
  return s.ok() ? "ok" : s.message();
}

#define EXPECT_ERROR_NAMES(change, field)                                \
  do {                                                                   \
    std::string m_ = error_of(change);                                   \
    EXPECT_NE(m_.find(field), std::string::npos) << field << ": " << m_; \
  } while (0)

TEST(SchedulerConfig, DefaultsAreValid) { EXPECT_TRUE(SchedulerConfig{}.validate().ok()); }

TEST(SchedulerConfig, EveryErrorNamesItsField) {
  EXPECT_ERROR_NAMES([](auto& c) { c.max_num_batched_tokens = 0; }, "max_num_batched_tokens");
  EXPECT_ERROR_NAMES([](auto& c) { c.max_num_seqs = 0; }, "max_num_seqs");
  EXPECT_ERROR_NAMES(
      [](auto& c) {
        c.max_num_seqs = 64;
        c.max_num_batched_tokens = 32;
      },
      "max_num_batched_tokens (32) must be >= max_num_seqs (64)");
  EXPECT_ERROR_NAMES([](auto& c) { c.max_model_len = 0; }, "max_model_len");
  EXPECT_ERROR_NAMES(
      [](auto& c) {
        c.enable_chunked_prefill = false;
        c.max_model_len = 8192;
        c.max_num_batched_tokens = 2048;
      },
      "enable_chunked_prefill");
  EXPECT_ERROR_NAMES([](auto& c) { c.max_num_partial_prefills = 0; }, "max_num_partial_prefills");
  EXPECT_ERROR_NAMES([](auto& c) { c.max_num_partial_prefills = c.max_num_seqs + 1; },
                     "max_num_partial_prefills");
  EXPECT_ERROR_NAMES([](auto& c) { c.long_prefill_token_threshold = 0; },
                     "long_prefill_token_threshold");
  EXPECT_ERROR_NAMES(
      [](auto& c) {
        c.long_prefill_token_threshold = 128;
        c.enable_chunked_prefill = false;
        c.max_num_batched_tokens = c.max_model_len;
      },
      "long_prefill_token_threshold needs enable_chunked_prefill");
  EXPECT_ERROR_NAMES([](auto& c) { c.policy = static_cast<SchedulerPolicy>(9); }, "policy");
  EXPECT_ERROR_NAMES([](auto& c) { c.admission = static_cast<AdmissionMode>(9); }, "admission");
  EXPECT_ERROR_NAMES([](auto& c) { c.preemption = static_cast<PreemptionPolicy>(9); },
                     "preemption");
  EXPECT_ERROR_NAMES([](auto& c) { c.small_first_tokens_per_step = 0; },
                     "small_first_tokens_per_step");
  EXPECT_ERROR_NAMES([](auto& c) { c.priority_steps_per_level = std::nan(""); },
                     "priority_steps_per_level");
  EXPECT_ERROR_NAMES([](auto& c) { c.max_overtakes = -1; }, "max_overtakes");
}

TEST(SchedulerConfig, NamesRoundTrip) {
  for (auto p : {SchedulerPolicy::kFcfs, SchedulerPolicy::kSmallFirst, SchedulerPolicy::kPriority})
    EXPECT_EQ(parse_scheduler_policy(scheduler_policy_name(p)), p);
  for (auto m : {AdmissionMode::kGuaranteed, AdmissionMode::kOptimistic})
    EXPECT_EQ(parse_admission_mode(admission_mode_name(m)), m);
  EXPECT_EQ(parse_scheduler_policy("lifo"), std::nullopt);
  EXPECT_EQ(parse_admission_mode("hopeful"), std::nullopt);
}

}  // namespace
}  // namespace drift
