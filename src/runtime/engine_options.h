// The engine options a program exposes to its user — the `drift` commands as flags, the Python
// package as keyword arguments of the same names (`--kv-cache-dtype` is `kv_cache_dtype=`):
// parallelism, context, KV memory, step budget, admission, queue. to_engine_config turns them into
// an EngineConfig, which the engine validates (errors name the field).
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

struct EngineOptions {
  int32_t threads = 2;
  int32_t parallel = 16;  // scheduler.max_num_seqs
  std::optional<int32_t> ctx_size;
  int32_t batch_tokens = 2048;  // scheduler.max_num_batched_tokens
  std::optional<double> kv_mib;
  double kv_ram_fraction = 0.1;
  int32_t page_size = 16;
  std::string kv_cache_dtype = "bf16";
  std::string admission = "guaranteed";
  // What an optimistic preemption does with the sequence's pages: auto (swap them to the disk
  // tier when the cost model predicts it faster than recomputing), swap or recompute.
  std::string preemption = "auto";
  std::string policy = "fcfs";
  int32_t max_queued = 256;
  std::optional<int32_t> default_max_tokens;  // absent: until a stop or the context is full
  bool no_chunked_prefill = false;
  bool no_prefix_cache = false;
  bool no_hybrid_kv = false;   // one KV group of every layer (kv.hybrid off)
  double target_itl_ms = 100;  // 0: off (the whole token budget in every step)
  double idle_step_ms = 500;   // 0: off (the whole token budget when nothing decodes)
  std::optional<double> target_ttft_ms;
  std::optional<double> max_ttft_s;
  SessionConfig sessions;
  KVEventsOptions kv_events;  // not part of EngineConfig: runtime/ wires the publisher in
  // The disk tier under the prefix cache (kv.disk_dir, kv.disk_gib): absent, RAM only.
  std::optional<std::string> kv_cache_dir;
  double kv_cache_dir_gib = 16;
  // KV-Compress: the kv_keep of requests that give none (1: off), and the eviction policy.
  double kv_keep = 1.0;
  std::string kv_evict = "attention";
  // Speculative decoding: auto (n-gram drafts in the steps where they are measured to pay:
  // scheduler/spec_auto_gate.h), ngram (drafts from each request's own prompt and output, and
  // the pool, always) or none.
  std::string spec = "auto";
  // The n-gram pool shared across requests, in MiB (0: none): drafts from other requests'
  // prompts and outputs where a request's own history has none.
  double spec_pool_mib = 8;
};

// The configuration these options describe; an error names the option whose text is not one of
// its choices (admission, policy, kv_cache_dtype) or whose number is out of range.
Expected<EngineConfig> to_engine_config(const EngineOptions& options);

}  // namespace drift
