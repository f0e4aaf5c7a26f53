// The engine options shared by the commands that run requests through the Engine (generate,
// chat, serve): parallelism, context, KV memory, step budget, admission, queue. They register on
// a CLI11 subcommand and turn into an EngineConfig, which validates them (errors name the field).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/engine_config.h"
#include "util/error.h"

namespace drift::cli {

struct EngineOptions {
  int32_t threads = 2;
  int32_t parallel = 16;  // scheduler.max_num_seqs
  std::optional<int32_t> ctx_size;
  int32_t batch_tokens = 2048;  // scheduler.max_num_batched_tokens
  std::optional<double> kv_mib;
  double kv_ram_fraction = 0.1;
  int32_t page_size = 16;
  std::string kv_cache_dtype = "f16";
  std::string admission = "guaranteed";
  std::string policy = "fcfs";
  int32_t max_queued = 256;
  std::optional<int32_t> default_max_tokens;  // absent: until a stop or the context is full
  bool no_chunked_prefill = false;
  bool no_prefix_cache = false;
  double target_itl_ms = 100;  // 0: off (the whole token budget in every step)
  std::optional<double> target_ttft_ms;
  std::optional<double> max_ttft_s;
  SessionConfig sessions;
};

// Adds --threads, --parallel, --ctx-size, --batch-tokens, --kv-mib, --kv-ram-fraction,
// --page-size, --kv-cache-dtype, --admission, --policy, --max-queued, --no-chunked-prefill,
// --no-prefix-cache,
// --target-itl-ms, --target-ttft-ms, --max-ttft-s,
// --max-sessions, --session-max-tokens, --session-ttl; the defaults are the
// values `options` holds when called.
void register_engine_options(CLI::App& cmd, EngineOptions& options);

Expected<EngineConfig> to_engine_config(const EngineOptions& options);

}  // namespace drift::cli
