// From the step cost model to the two decisions that hold latency targets:
//   - the prefill token budget of the next step: the largest whose predicted step time stays
//     under the inter-token latency target while sequences decode, or under the idle step bound
//     when none does (the floor until the model has measured a step with decodes), grown when
//     the oldest request would otherwise miss its time-to-first-token target, and never below a
//     floor, so long prefills keep progressing;
//   - the predicted time to first token of a request submitted now, for predictive admission.
// Pure functions of their inputs: no clock, no allocation.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/step_cost_model.h"
#include "scheduler/step_load.h"
#include "util/error.h"

namespace drift {

struct LatencyConfig {
  // Predicted step time not to exceed while sequences decode: each step's prefill chunk is cut
  // to fit. nullopt: every step may use the whole token budget (no time awareness).
  std::optional<double> target_itl_seconds = 0.1;
  // Predicted step time not to exceed when nothing decodes (with target_itl_seconds set): a
  // request that arrives during a step can only be scheduled after it, so a long prompt is
  // prefilled in steps of about this length — a request arriving meanwhile starts within one,
  // and one sharing the prompt's prefix joins the step that writes its last shared page
  // (EngineScheduler::try_admit) instead of queueing behind the whole prompt. nullopt: the whole
  // token budget when nothing decodes.
  std::optional<double> idle_step_seconds = 0.5;
  // When the oldest request still without its first token would miss this, steps take more
  // prefill than the inter-token target allows (first tokens before smooth streams). nullopt: off.
  std::optional<double> target_ttft_seconds;
  // Refuse a request at once (overloaded, with a retry time) when its predicted time to first
  // token exceeds this. nullopt: queue everything (up to max_queued_requests).
  std::optional<double> max_ttft_seconds;
  // The least prefill a step carries while prompts wait, whatever the targets: no prefill is
  // ever starved by decodes. Small, because when decodes alone use up the target every token of
  // the floor adds to the inter-token latency (on the 2-core reference machine a prefill token
  // costs ~2-8 ms).
  int32_t min_prefill_tokens = 16;

  Status validate() const;  // errors name the field ("latency.target_itl_seconds ...")
};

struct BudgetInputs {
  StepLoad load;
  // Seconds since the oldest request still waiting for its first token was submitted (0: none).
  double oldest_unserved_seconds = 0;
  int32_t max_num_batched_tokens = 0;
};

// The predicted seconds of a step that runs `load`'s decodes and `prefill_tokens` of prefill
// resuming at load.prefill_start.
double predict_step_seconds(const StepCosts& costs, const StepLoad& load, int32_t prefill_tokens);

// The next step's prefill token budget, in [1, max_num_batched_tokens].
int32_t plan_prefill_budget(const StepCostModel& model, const LatencyConfig& config,
                            const BudgetInputs& in);

// Seconds per prefill token at this budget (step time / prefill tokens): how fast the prefill
// backlog drains. 0 until the model is calibrated.
double seconds_per_prefill_token(const StepCostModel& model, const StepLoad& load,
                                 int32_t prefill_budget);

// Predictive admission: the time to first token of a request with `prompt_tokens` behind
// `backlog_tokens` of prefill, draining at `seconds_per_token`.
double predict_ttft_seconds(int64_t backlog_tokens, int64_t prompt_tokens,
                            double seconds_per_token);

}  // namespace drift
