#include "engine/latency_planner.h"

#include <algorithm>
#include <cmath>

namespace drift {

namespace {

Status check_seconds(const char* field, const std::optional<double>& value) {
  if (value && (!std::isfinite(*value) || *value <= 0))
    return make_error("latency.{} must be a finite number > 0 when set, got {}", field, *value);
  return Status::Ok();
}

// The largest prefill in [0, cap] whose step is predicted to take at most `seconds` (0 if even
// the decodes alone exceed it). Step time grows with prefill, so a bisection finds it.
int32_t largest_prefill_within(const StepCosts& costs, const StepLoad& load, int32_t cap,
                               double seconds) {
  int32_t lo = 0, hi = cap;  // invariant: lo fits (or is 0), everything above hi does not
  if (predict_step_seconds(costs, load, hi) <= seconds) return hi;
  while (lo + 1 < hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    (predict_step_seconds(costs, load, mid) <= seconds ? lo : hi) = mid;
  }
  return lo;
}

// The smallest prefill budget, at least `at_least`, that drains `work` prefill tokens within
// `slack` seconds (cap if none does). Finishing in k steps takes at least ceil(work / k) tokens
// per step, for k steps of predicted time each; the largest k that fits gives the answer. (The
// drain time is not monotonic in the budget — ceil — so a bisection over budgets can miss it.)
int32_t smallest_prefill_draining(const StepCosts& costs, const StepLoad& load, int32_t cap,
                                  int32_t at_least, int64_t work, double slack) {
  if (slack <= 0) return cap;
  int32_t best = cap;
  const int64_t first = (work + cap - 1) / cap;
  const int64_t last = (work + at_least - 1) / at_least;
  for (int64_t k = first; k <= last; ++k) {
    const int32_t b = int32_t((work + k - 1) / k);
    if (double(k) * predict_step_seconds(costs, load, b) <= slack) best = std::min(best, b);
  }
  return best;
}

}  // namespace

Status LatencyConfig::validate() const {
  DRIFT_RETURN_IF_ERROR(check_seconds("target_itl_seconds", target_itl_seconds));
  DRIFT_RETURN_IF_ERROR(check_seconds("idle_step_seconds", idle_step_seconds));
  DRIFT_RETURN_IF_ERROR(check_seconds("target_ttft_seconds", target_ttft_seconds));
  DRIFT_RETURN_IF_ERROR(check_seconds("max_ttft_seconds", max_ttft_seconds));
  if (min_prefill_tokens < 1)
    return make_error("latency.min_prefill_tokens must be >= 1, got {}", min_prefill_tokens);
  return Status::Ok();
}

double predict_step_seconds(const StepCosts& costs, const StepLoad& load, int32_t prefill_tokens) {
  const int64_t b = prefill_tokens;
  StepShape shape;
  shape.prefill_tokens = b;
  shape.decode_sequences = load.decoding;
  shape.attended_positions = load.decode_context + b * load.prefill_start + b * (b + 1) / 2;
  return costs.seconds(shape);
}

int32_t plan_prefill_budget(const StepCostModel& model, const LatencyConfig& config,
                            const BudgetInputs& in) {
  // Rule: the progress floor while the model has not measured a step with decodes yet (one cheap
  // step teaches it), the whole budget until it has measured one at all; else the largest
  // prefill that keeps the step under the inter-token target — under the idle step bound when
  // nothing decodes, the whole budget without one — grown to what the oldest waiting request
  // needs for its first-token target, and at least the floor.
  const int32_t whole = std::max(1, in.max_num_batched_tokens);
  if (!config.target_itl_seconds) return whole;
  const bool idle = in.load.decoding == 0;
  if (idle && (!config.idle_step_seconds || !model.calibrated())) return whole;
  const int32_t cap = std::max(1, whole - in.load.decoding);
  if (!model.calibrated()) return std::min(config.min_prefill_tokens, cap);
  const double step_seconds = idle ? *config.idle_step_seconds : *config.target_itl_seconds;
  int32_t budget = largest_prefill_within(model.costs(), in.load, cap, step_seconds);
  if (config.target_ttft_seconds && in.oldest_unserved_seconds > 0 &&
      in.load.pending_prefill_tokens > 0) {
    const double slack = *config.target_ttft_seconds - in.oldest_unserved_seconds;
    budget =
        std::max(budget, smallest_prefill_draining(model.costs(), in.load, cap, std::max(budget, 1),
                                                   in.load.pending_prefill_tokens, slack));
  }
  return std::clamp(budget, std::min(config.min_prefill_tokens, cap), cap);
}

double seconds_per_prefill_token(const StepCostModel& model, const StepLoad& load,
                                 int32_t prefill_budget) {
  if (!model.calibrated() || prefill_budget < 1) return 0;
  return predict_step_seconds(model.costs(), load, prefill_budget) / double(prefill_budget);
}

double predict_ttft_seconds(int64_t backlog_tokens, int64_t prompt_tokens,
                            double seconds_per_token) {
  return double(std::max<int64_t>(0, backlog_tokens) + prompt_tokens) * seconds_per_token;
}

}  // namespace drift
