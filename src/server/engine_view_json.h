// One event of GET /v1/engine/events: an engine snapshot (engine_snapshot.h) with the metrics
// read beside it, as the /engine page draws them.
//
//   {"version", "steps", "healthy", "page_size",
//    "counts": {"running", "waiting", "preempted", "queued" (waiting + not yet taken)},
//    "sequences": [{"id" (a string: ids exceed JavaScript's exact integers), "phase",
//                   "preempted", "prompt_tokens", "prefilled_tokens", "generated_tokens",
//                   "max_new_tokens", "pages"}],
//    "recent_steps": [[step, prefill_tokens, decode_tokens, sequences, milliseconds], ...],
//    "kv": {"total", "free", "used", "cached", "shared", "map": "ffuusc..."},
//    "prefix_cache": {"enabled", "queried_tokens", "hit_tokens", "evictions"},
//    "sessions": {"open", "tokens"},
//    "totals": {"prefill_tokens", "decode_tokens", "generated_tokens", "finished"},
//    "ttft", "itl": {"bounds": [s...], "counts": [per bucket, the last above every bound],
//                    "count", "sum"}}
#pragma once

#include <cstdint>
#include <string>

#include "engine/engine_metrics.h"
#include "engine/engine_snapshot.h"

namespace drift::server {

std::string engine_view_json(const EngineSnapshot& snapshot, const EngineMetrics& metrics,
                             int32_t page_size);

}  // namespace drift::server
