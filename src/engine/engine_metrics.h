// What the engine reports about itself: gauges (queue lengths, KV pages), counters (steps,
// tokens, finishes by reason) and per-request latency histograms with fixed buckets, kept raw
// so that the server can export them as Prometheus histograms.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/session_store.h"
#include "engine/step_cost_model.h"
#include "kv/kv_disk_store.h"
#include "kv/kv_event_sink.h"
#include "kv/prefix_cache.h"
#include "kv/prefix_disk_tier.h"
#include "scheduler/preemption_cost.h"
#include "scheduler/scheduler_config.h"
#include "scheduler/sequence_state.h"

namespace drift {

// Fixed upper bounds, ascending; an implicit last bucket takes everything above (+Inf).
// counts[i] holds the observations in (upper_bounds[i-1], upper_bounds[i]] — per bucket, not
// cumulative (Prometheus' le-buckets are the running sums).
struct Histogram {
  std::vector<double> upper_bounds;
  std::vector<uint64_t> counts;  // [upper_bounds.size() + 1]
  uint64_t count = 0;
  double sum = 0;

  static Histogram with_bounds(std::span<const double> upper_bounds);
  void observe(double value);  // no allocation
};

// Bucket bounds in seconds.
inline constexpr double kQueueTimeBuckets[] = {0.001, 0.005, 0.01,  0.025, 0.05, 0.1,
                                               0.25,  0.5,   1.0,   2.5,   5.0,  10.0,
                                               30.0,  60.0,  120.0, 300.0, 600.0};
inline constexpr double kTimeToFirstTokenBuckets[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08,
                                                      0.1,   0.25,  0.5,  0.75, 1.0,  2.5,  5.0,
                                                      7.5,   10.0,  20.0, 40.0, 80.0, 160.0};
inline constexpr double kInterTokenLatencyBuckets[] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
    0.3,   0.4,    0.5,   0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0};
inline constexpr double kEndToEndBuckets[] = {0.1,  0.3,  0.5,   0.8,   1.0,   1.5,   2.0,
                                              2.5,  5.0,  10.0,  15.0,  20.0,  30.0,  40.0,
                                              50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0};

// The disk tier: what it read and wrote for the prefix cache, and its store's files.
// Tiered preemption (scheduler/preemption_cost.h): preemptions by the way chosen, the seconds the
// cost model predicted for each way summed over every choice it made, and its last choice.
struct PreemptionMetrics {
  uint64_t swapped = 0;
  uint64_t recomputed = 0;
  uint64_t tails_restored = 0;  // swapped sequences re-admitted with their partial page read back
  double predicted_swap_seconds = 0;
  double predicted_recompute_seconds = 0;
  std::optional<PreemptionChoice> last;
};

struct KVDiskMetrics {
  PrefixDiskTierStats tier;
  KVDiskStats store;
  uint64_t admission_waits = 0;  // admission attempts that waited for pages being read
  // Requests held for room to read their whole run from disk, and holds that gave up (as long
  // as computing it would have taken) and computed what did not fit.
  uint64_t room_holds = 0;
  uint64_t room_holds_expired = 0;
  int32_t loads_in_flight = 0;
  PreemptionMetrics preemption;
};

struct EngineMetrics {
  bool healthy = true;

  // Gauges.
  int32_t num_waiting = 0;  // submitted, not admitted yet (intake + scheduler queue)
  int32_t num_running = 0;  // admitted: prefilling or decoding
  int32_t kv_pages_total = 0;
  int32_t kv_page_size = 0;    // tokens per page
  uint64_t kv_page_bytes = 0;  // K/V bytes of one page
  int32_t kv_pages_used = 0;
  int32_t kv_pages_free = 0;
  int32_t kv_pages_cached = 0;

  // Counters since the engine started.
  uint64_t steps = 0;  // non-empty steps
  int32_t last_step_prefill_tokens = 0;
  int32_t last_step_decode_tokens = 0;
  uint64_t prefill_tokens_total = 0;
  uint64_t decode_tokens_total = 0;
  uint64_t preemptions = 0;
  // Speculative decoding (SchedulerStats): decodes that carried a draft, their draft tokens, the
  // drafts accepted, and those by position in the draft (vLLM's spec_decode counters).
  uint64_t spec_drafts = 0;
  uint64_t spec_draft_tokens = 0;
  uint64_t spec_accepted_tokens = 0;
  std::array<uint64_t, kMaxSpecDraftTokens> spec_accepted_by_position{};
  // Of those, the draft tokens from the pool shared across requests and the accepted ones; and
  // the pool's memory (fixed at start; 0: no pool).
  uint64_t spec_pool_draft_tokens = 0;
  uint64_t spec_pool_accepted_tokens = 0;
  uint64_t spec_pool_bytes = 0;
  // Draft tokens a grammar forced, and of those the accepted.
  uint64_t spec_forced_draft_tokens = 0;
  uint64_t spec_forced_accepted_tokens = 0;
  // --spec auto: decode steps measured with drafts allowed, and without.
  uint64_t spec_auto_steps_with_drafts = 0;
  uint64_t spec_auto_steps_without_drafts = 0;
  // The draft model (engine/draft_model.h): its draft tokens verified and accepted; the steps
  // that asked it, the seconds it spent in them and its forward passes; its KV memory (0: none).
  uint64_t spec_draft_model_draft_tokens = 0;
  uint64_t spec_draft_model_accepted_tokens = 0;
  uint64_t spec_draft_model_steps = 0;
  double spec_draft_model_seconds = 0;
  uint64_t spec_draft_model_passes = 0;
  uint64_t spec_draft_model_kv_bytes = 0;
  // The step cost model (step_cost_model.h), learned from the steps run so far, and what the
  // latency targets made of it: the prefill token budget of the last step, and that step's
  // predicted and measured executor time.
  int32_t threads = 0;  // compute threads: the costs hold for this count
  bool step_costs_calibrated = false;
  StepCosts step_costs;
  int32_t prefill_token_budget = 0;
  double last_step_predicted_seconds = 0;
  double last_step_seconds = 0;
  // Prefix cache counters, in tokens like vLLM's (queried, hit) and in pages (evictions); all
  // zero when prefix caching is off.
  bool prefix_cache_enabled = false;
  PrefixCacheStats prefix_cache;
  // The disk tier under the prefix cache (kv/prefix_disk_tier.h); nullopt when there is none.
  std::optional<KVDiskMetrics> kv_disk;
  // KV events sent to routers (kv/kv_event_sink.h), read at the call; nullopt when none are.
  std::optional<KVEventCounts> kv_events;
  // Conversation sessions: open now, tokens held, expired and refused turns (read at the call).
  SessionStats sessions;
  uint64_t prompt_tokens_total = 0;      // of requests that finished (rejected ones excluded)
  uint64_t generation_tokens_total = 0;  // tokens delivered
  // Embedding requests that returned their vector, and the prompt tokens they pooled (also
  // counted in prompt_tokens_total).
  uint64_t embeddings_total = 0;
  uint64_t embedding_prompt_tokens_total = 0;
  std::array<uint64_t, 5> finished_by_reason{};  // indexed by FinishReason; kRejected included

  // Per request, in seconds.
  Histogram queue_time = Histogram::with_bounds(kQueueTimeBuckets);
  Histogram time_to_first_token = Histogram::with_bounds(kTimeToFirstTokenBuckets);
  Histogram inter_token_latency = Histogram::with_bounds(kInterTokenLatencyBuckets);
  Histogram end_to_end = Histogram::with_bounds(kEndToEndBuckets);  // accepted requests

  uint64_t finished(FinishReason reason) const { return finished_by_reason[size_t(reason)]; }
  uint64_t finished_total() const;
};

}  // namespace drift
