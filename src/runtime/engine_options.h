// The engine options a program exposes to its user — the `drift` commands as flags, the Python
// package as keyword arguments of the same names (`--kv-cache-dtype` is `kv_cache_dtype=`):
// parallelism, context, KV memory, step budget, admission, queue. to_engine_config turns them into
// an EngineConfig, which the engine validates (errors name the field). Every default is
// EngineConfig's, read from program_engine_defaults(), never written here a second time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/engine_config.h"
#include "util/error.h"

namespace drift {

// vLLM's KV event stream (kv_events/zmq_kv_event_publisher.h): `drift serve
// --kv-events-endpoint tcp://*:5557`, `drift.LLM(kv_events_endpoint=...)`.
struct KVEventsOptions {
  std::optional<std::string> endpoint;  // absent: no events
  std::string topic;                    // first frame of each message (llm-d: "kv@<pod>@<model>")
};

// The engine configuration the programs start from: EngineConfig's defaults (their one owner),
// except for the decisions below, which are the programs' and are made here only. A library user
// who builds an EngineConfig gets the engine's defaults; `drift serve`, the other commands and
// drift.LLM get these.
//   threads        2, not 1: a program owns the machine it runs on, and one compute thread would
//                  leave every multi-core CPU idle; EngineConfig keeps 1 so that tests and
//                  embedders (Ray replicas, python/drift/ray.py, which set their own) do not
//                  oversubscribe the cores they share.
//   max_num_seqs   16, not the scheduler's 64: a served decode step of 16 sequences takes 15-40 ms
//                  on 2 cores (design-notes "Why 100 ms"), which leaves most of --target-itl-ms's
//                  100 ms to prefill; every served figure of the notes was taken with 16. The
//                  scheduler's 64 is what its tests and an embedder sizing its own batch get.
//   spec           auto with an 8 MiB n-gram pool, not off: drafts never change the output, and
//                  auto keeps them only in the steps where they are measured to pay; an engine
//                  built by hand stays one token per step, as its tests expect.
const EngineConfig& program_engine_defaults();

// An option's unit from EngineConfig's: seconds to milliseconds (0: off), pool slots to MiB.
inline double milliseconds_or_off(std::optional<double> seconds) {
  return seconds ? *seconds * 1000 : 0;
}
double spec_pool_mib_of(int64_t pool_entries);

struct EngineOptions {
  int32_t threads = program_engine_defaults().threads;
  int32_t parallel = program_engine_defaults().scheduler.max_num_seqs;
  std::optional<int32_t> ctx_size;  // absent: EngineConfig::max_model_len's rule
  int32_t batch_tokens = program_engine_defaults().scheduler.max_num_batched_tokens;
  std::optional<double> kv_mib;  // absent: kv_ram_fraction
  double kv_ram_fraction = program_engine_defaults().kv.budget.ram_fraction.value_or(0);
  int32_t page_size = program_engine_defaults().kv.page_size;
  std::string kv_cache_dtype{kv_dtype_name(program_engine_defaults().kv.dtype)};
  std::string admission{admission_mode_name(program_engine_defaults().scheduler.admission)};
  // What an optimistic preemption does with the sequence's pages: auto (swap them to the disk
  // tier when the cost model predicts it faster than recomputing), swap or recompute.
  std::string preemption{preemption_policy_name(program_engine_defaults().scheduler.preemption)};
  std::string policy{scheduler_policy_name(program_engine_defaults().scheduler.policy)};
  int32_t max_queued = program_engine_defaults().max_queued_requests;
  std::optional<int32_t> default_max_tokens = program_engine_defaults().default_max_tokens;
  bool no_chunked_prefill = !program_engine_defaults().scheduler.enable_chunked_prefill;
  bool no_prefix_cache = !program_engine_defaults().kv.enable_prefix_caching;
  bool no_hybrid_kv = !program_engine_defaults().kv.hybrid;  // one KV group of every layer
  // 0: off (the whole token budget in every step)
  double target_itl_ms = milliseconds_or_off(program_engine_defaults().latency.target_itl_seconds);
  // 0: off (the whole token budget when nothing decodes)
  double idle_step_ms = milliseconds_or_off(program_engine_defaults().latency.idle_step_seconds);
  std::optional<double> target_ttft_ms;  // absent: off, as LatencyConfig's
  std::optional<double> max_ttft_s;      // absent: off, as LatencyConfig's
  SessionConfig sessions = program_engine_defaults().sessions;
  KVEventsOptions kv_events;  // not part of EngineConfig: runtime/ wires the publisher in
  // The disk tier under the prefix cache (kv.disk_dir, kv.disk_gib): absent, RAM only.
  std::optional<std::string> kv_cache_dir = program_engine_defaults().kv.disk_dir;
  double kv_cache_dir_gib = program_engine_defaults().kv.disk_gib;
  // KV-Compress: the kv_keep of requests that give none (1: off), and the eviction policy.
  double kv_keep = program_engine_defaults().scheduler.kv_compress.keep;
  std::string kv_evict{
      kv_evict_policy_name(program_engine_defaults().scheduler.kv_compress.policy)};
  // Speculative decoding: auto (n-gram drafts in the steps where they are measured to pay:
  // scheduler/spec_auto_gate.h), ngram (drafts from each request's own prompt and output, and
  // the pool, always), draft (the draft model's drafts, or n-grams where they match long) or
  // none. auto uses the draft model too when one is given.
  std::string spec{spec_mode_name(program_engine_defaults().scheduler.spec.mode)};
  // The draft model (a GGUF with the model's vocabulary) and its KV memory in MiB (absent: the
  // pages of the context length, engine/draft_model.h).
  std::optional<std::string> spec_draft_model;
  std::optional<double> spec_draft_kv_mib;
  // The n-gram pool shared across requests, in MiB (0: none): drafts from other requests'
  // prompts and outputs where a request's own history has none.
  double spec_pool_mib = spec_pool_mib_of(program_engine_defaults().scheduler.spec.pool_entries);
  // The longest draft a sequence carries in a step (its adaptive length stays under it).
  int32_t spec_max_draft = program_engine_defaults().scheduler.spec.max_draft_tokens;
};

// The configuration these options describe; an error names the option whose text is not one of
// its choices (admission, policy, kv_cache_dtype) or whose number is out of range.
Expected<EngineConfig> to_engine_config(const EngineOptions& options);

}  // namespace drift
