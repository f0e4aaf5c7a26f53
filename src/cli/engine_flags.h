// The engine options (runtime/engine_options.h) as flags of the commands that run requests
// through the Engine (generate, chat, serve, batched-bench).
#pragma once

#include <CLI/CLI.hpp>

#include "runtime/engine_options.h"

namespace drift::cli {

// Adds --threads, --parallel, --ctx-size, --batch-tokens, --kv-mib, --kv-ram-fraction,
// --page-size, --kv-cache-dtype, --spec, --spec-draft-model, --spec-draft-kv-mib,
// --spec-pool-mib, --spec-max-draft, --admission, --preemption, --policy, --max-queued,
// --no-chunked-prefill,
// --no-prefix-cache, --no-hybrid-kv, --target-itl-ms, --idle-step-ms, --target-ttft-ms,
// --max-ttft-s, --max-sessions, --session-max-tokens, --session-ttl; the defaults are the values
// `options` holds when called.
void register_engine_options(CLI::App& cmd, EngineOptions& options);

}  // namespace drift::cli
