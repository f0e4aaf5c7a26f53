#include "scheduler/scheduler_config.h"

#include <cmath>

namespace drift {

std::string_view scheduler_policy_name(SchedulerPolicy policy) {
  switch (policy) {
    case SchedulerPolicy::kFcfs:
      return "fcfs";
    case SchedulerPolicy::kSmallFirst:
      return "small_first";
    case SchedulerPolicy::kPriority:
      return "priority";
  }
  return "unknown";
}

std::optional<SchedulerPolicy> parse_scheduler_policy(std::string_view name) {
  for (auto p : {SchedulerPolicy::kFcfs, SchedulerPolicy::kSmallFirst, SchedulerPolicy::kPriority})
    if (name == scheduler_policy_name(p)) return p;
  return std::nullopt;
}

std::string_view admission_mode_name(AdmissionMode mode) {
  switch (mode) {
    case AdmissionMode::kGuaranteed:
      return "guaranteed";
    case AdmissionMode::kOptimistic:
      return "optimistic";
  }
  return "unknown";
}

std::optional<AdmissionMode> parse_admission_mode(std::string_view name) {
  for (auto m : {AdmissionMode::kGuaranteed, AdmissionMode::kOptimistic})
    if (name == admission_mode_name(m)) return m;
  return std::nullopt;
}

std::string_view spec_mode_name(SpecMode mode) {
  switch (mode) {
    case SpecMode::kNone:
      return "none";
    case SpecMode::kNgram:
      return "ngram";
    case SpecMode::kAuto:
      return "auto";
    case SpecMode::kDraft:
      return "draft";
  }
  return "unknown";
}

Status SpecConfig::validate() const {
  if (spec_mode_name(mode) == "unknown")
    return make_error("spec.mode has invalid value {}", static_cast<int>(mode));
  if (max_draft_tokens < 0 || max_draft_tokens > kMaxSpecDraftTokens)
    return make_error("spec.max_draft_tokens must be in [0, {}], got {}", kMaxSpecDraftTokens,
                      max_draft_tokens);
  if (pool_entries < 0 || pool_entries > (int64_t{1} << 32))
    return make_error("spec.pool_entries must be in [0, 2^32], got {}", pool_entries);
  if (ngram_over_model_match < 2)
    return make_error("spec.ngram_over_model_match must be >= 2, got {}", ngram_over_model_match);
  if (pool_context < 1 || pool_context > 8)
    return make_error("spec.pool_context must be in [1, 8], got {}", pool_context);
  if (max_step_draft_tokens < 0 || max_step_draft_tokens > 1024)
    return make_error("spec.max_step_draft_tokens must be in [0, 1024], got {}",
                      max_step_draft_tokens);
  return Status::Ok();
}

Status SchedulerConfig::validate() const {
  if (max_num_batched_tokens < 1)
    return make_error("max_num_batched_tokens must be >= 1, got {}", max_num_batched_tokens);
  if (max_num_seqs < 1) return make_error("max_num_seqs must be >= 1, got {}", max_num_seqs);
  if (max_num_batched_tokens < max_num_seqs)
    return make_error(
        "max_num_batched_tokens ({}) must be >= max_num_seqs ({}) so that every running "
        "sequence's decode token fits in one step",
        max_num_batched_tokens, max_num_seqs);
  if (max_model_len < 1) return make_error("max_model_len must be >= 1, got {}", max_model_len);
  if (!enable_chunked_prefill && max_num_batched_tokens < max_model_len)
    return make_error(
        "max_num_batched_tokens ({}) must be >= max_model_len ({}) when enable_chunked_prefill "
        "is off, or a long prompt could never be prefilled",
        max_num_batched_tokens, max_model_len);
  if (max_num_partial_prefills < 1 || max_num_partial_prefills > max_num_seqs)
    return make_error("max_num_partial_prefills must be in [1, max_num_seqs={}], got {}",
                      max_num_seqs, max_num_partial_prefills);
  if (long_prefill_token_threshold) {
    if (*long_prefill_token_threshold < 1)
      return make_error("long_prefill_token_threshold must be >= 1 when set, got {}",
                        *long_prefill_token_threshold);
    if (!enable_chunked_prefill)
      return make_error("long_prefill_token_threshold needs enable_chunked_prefill");
  }
  if (max_overtakes < 0) return make_error("max_overtakes must be >= 0, got {}", max_overtakes);
  if (scheduler_policy_name(policy) == "unknown")
    return make_error("policy has invalid value {}", static_cast<int>(policy));
  if (admission_mode_name(admission) == "unknown")
    return make_error("admission has invalid value {}", static_cast<int>(admission));
  if (!parse_preemption_policy(preemption_policy_name(preemption)))
    return make_error("preemption has invalid value {}", static_cast<int>(preemption));
  if (!std::isfinite(small_first_tokens_per_step) || small_first_tokens_per_step <= 0)
    return make_error("small_first_tokens_per_step must be a finite number > 0, got {}",
                      small_first_tokens_per_step);
  if (!std::isfinite(priority_steps_per_level) || priority_steps_per_level <= 0)
    return make_error("priority_steps_per_level must be a finite number > 0, got {}",
                      priority_steps_per_level);
  DRIFT_RETURN_IF_ERROR(kv_compress.validate());
  DRIFT_RETURN_IF_ERROR(spec.validate());
  return Status::Ok();
}

}  // namespace drift
