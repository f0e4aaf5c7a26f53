#include "runtime/engine_options.h"

#include <algorithm>
#include <cmath>

#include "scheduler/ngram_pool.h"

namespace drift {

namespace {

constexpr double kBytesPerMib = 1024.0 * 1024.0;

// The numbers the conversion itself must trust (a size cast to bytes, milliseconds to seconds);
// the engine checks the rest of the configuration when it is set up.
Status check_numbers(const EngineOptions& o) {
  if (o.kv_mib && !(*o.kv_mib >= 1.0 && *o.kv_mib <= 1e9))
    return make_error("kv_mib must be in [1, 1e9], got {}", *o.kv_mib);
  if (!(o.target_itl_ms >= 0 && o.target_itl_ms <= 1e7))
    return make_error("target_itl_ms must be in [0, 1e7], got {}", o.target_itl_ms);
  if (o.target_ttft_ms && !(*o.target_ttft_ms >= 0.001 && *o.target_ttft_ms <= 1e9))
    return make_error("target_ttft_ms must be in [0.001, 1e9], got {}", *o.target_ttft_ms);
  if (o.max_ttft_s && !(*o.max_ttft_s >= 0.001 && *o.max_ttft_s <= 1e7))
    return make_error("max_ttft_s must be in [0.001, 1e7], got {}", *o.max_ttft_s);
  // Written so that NaN fails too: these come from files and the environment as text.
  if (!(o.kv_keep > 0.0 && o.kv_keep <= 1.0))
    return make_error("kv_keep must be in (0, 1], got {}", o.kv_keep);
  if (!(o.kv_ram_fraction > 0.0 && o.kv_ram_fraction <= 1.0))
    return make_error("kv_ram_fraction must be in (0, 1], got {}", o.kv_ram_fraction);
  if (!(o.sessions.idle_ttl_seconds > 0.0 && o.sessions.idle_ttl_seconds <= 1e9))
    return make_error("session_ttl must be in (0, 1e9] seconds, got {}",
                      o.sessions.idle_ttl_seconds);
  return Status::Ok();
}

}  // namespace

const EngineConfig& program_engine_defaults() {
  // The programs' three decisions (engine_options.h says why); everything else is EngineConfig's.
  static const EngineConfig defaults = [] {
    EngineConfig c;
    c.threads = 2;
    c.scheduler.max_num_seqs = 16;
    c.scheduler.spec.mode = SpecMode::kAuto;
    c.scheduler.spec.pool_entries = int64_t(8 * kBytesPerMib) / int64_t(NgramPool::kEntryBytes);
    return c;
  }();
  return defaults;
}

double spec_pool_mib_of(int64_t pool_entries) {
  return double(pool_entries) * double(NgramPool::kEntryBytes) / kBytesPerMib;
}

Expected<EngineConfig> to_engine_config(const EngineOptions& o) {
  if (Status s = check_numbers(o); !s.ok()) return s.error();
  // What no option sets stays the programs' default.
  EngineConfig config = program_engine_defaults();
  config.threads = o.threads;
  config.scheduler.max_num_seqs = o.parallel;
  config.scheduler.max_num_batched_tokens = std::max(o.batch_tokens, o.parallel);
  config.scheduler.enable_chunked_prefill = !o.no_chunked_prefill;
  auto admission = parse_admission_mode(o.admission);
  if (!admission)
    return make_error("admission: expected guaranteed or optimistic, got '{}'", o.admission);
  config.scheduler.admission = *admission;
  auto preemption = parse_preemption_policy(o.preemption);
  if (!preemption)
    return make_error("preemption: expected auto, swap or recompute, got '{}'", o.preemption);
  config.scheduler.preemption = *preemption;
  auto policy = parse_scheduler_policy(o.policy);
  if (!policy)
    return make_error("policy: expected fcfs, small_first or priority, got '{}'", o.policy);
  config.scheduler.policy = *policy;
  if (o.ctx_size) {
    config.max_model_len = *o.ctx_size;
    // Also lift the cap, so that an explicit size up to the trained context is honoured.
    config.max_model_len_limit = std::max(config.max_model_len_limit, *o.ctx_size);
  }
  config.kv.page_size = o.page_size;
  auto dtype = parse_kv_dtype(o.kv_cache_dtype);
  if (!dtype)
    return make_error("kv_cache_dtype: expected f16, bf16, f32, int8 or int4, got '{}'",
                      o.kv_cache_dtype);
  config.kv.dtype = *dtype;
  config.kv.budget = o.kv_mib ? KVMemoryBudget::of_bytes(static_cast<uint64_t>(
                                    std::llround(*o.kv_mib * 1024.0 * 1024.0)))
                              : KVMemoryBudget::of_ram_fraction(o.kv_ram_fraction);
  config.max_queued_requests = o.max_queued;
  config.kv.enable_prefix_caching = !o.no_prefix_cache;
  config.kv.hybrid = !o.no_hybrid_kv;
  config.kv.disk_dir = o.kv_cache_dir;
  config.kv.disk_gib = o.kv_cache_dir_gib;
  config.latency.target_itl_seconds =
      o.target_itl_ms > 0 ? std::optional<double>(o.target_itl_ms / 1000) : std::nullopt;
  config.latency.idle_step_seconds =
      o.idle_step_ms > 0 ? std::optional<double>(o.idle_step_ms / 1000) : std::nullopt;
  if (o.target_ttft_ms) config.latency.target_ttft_seconds = *o.target_ttft_ms / 1000;
  config.latency.max_ttft_seconds = o.max_ttft_s;
  config.sessions = o.sessions;
  config.scheduler.kv_compress.keep = o.kv_keep;
  auto evict = parse_kv_evict_policy(o.kv_evict);
  if (!evict) return make_error("kv_evict: expected attention or window, got '{}'", o.kv_evict);
  config.scheduler.kv_compress.policy = *evict;
  config.default_max_tokens = o.default_max_tokens;
  if (o.spec == "auto") {
    config.scheduler.spec.mode = SpecMode::kAuto;
  } else if (o.spec == "ngram") {
    config.scheduler.spec.mode = SpecMode::kNgram;
  } else if (o.spec == "draft") {
    config.scheduler.spec.mode = SpecMode::kDraft;
    if (!o.spec_draft_model)
      return make_error(
          "spec: draft needs a draft model: give it with spec_draft_model "
          "(--spec-draft-model PATH)");
  } else if (o.spec == "none") {
    config.scheduler.spec.mode = SpecMode::kNone;
  } else {
    return make_error("spec: expected auto, ngram, draft or none, got '{}'", o.spec);
  }
  config.spec_draft.model_path = o.spec_draft_model;
  if (o.spec_draft_kv_mib) {
    if (!(*o.spec_draft_kv_mib >= 1 && *o.spec_draft_kv_mib <= 1 << 20))
      return make_error("spec_draft_kv_mib must be in [1, 1048576], got {}", *o.spec_draft_kv_mib);
    config.spec_draft.kv_mib = int64_t(*o.spec_draft_kv_mib);
  }
  if (!(o.spec_pool_mib >= 0 && o.spec_pool_mib <= 16384))
    return make_error("spec_pool_mib must be in [0, 16384], got {}", o.spec_pool_mib);
  config.scheduler.spec.pool_entries =
      int64_t(o.spec_pool_mib * kBytesPerMib) / int64_t(NgramPool::kEntryBytes);
  if (o.spec_max_draft < 1 || o.spec_max_draft > kMaxSpecDraftTokens)
    return make_error("spec_max_draft must be in [1, {}], got {}", kMaxSpecDraftTokens,
                      o.spec_max_draft);
  config.scheduler.spec.max_draft_tokens = o.spec_max_draft;
  return config;
}

}  // namespace drift
