// /metrics in the Prometheus text format (version 0.0.4), under vLLM's metric names so that
// dashboards and routers built for vLLM read drift unchanged, plus drift's own under `drift:`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/engine_metrics.h"

namespace drift::server {

// What the HTTP layer counts itself.
struct ServerStats {
  int64_t open_connections = 0;
  uint64_t http_requests_total = 0;
  uint64_t http_requests_4xx = 0;
  uint64_t http_requests_5xx = 0;
  uint64_t client_disconnects = 0;  // generations cancelled because the client went away
  uint64_t stop_string_matches = 0;
  // The Responses API's store (response_store.h).
  int64_t stored_responses = 0;
  int64_t stored_response_bytes = 0;
  uint64_t stored_response_evictions = 0;
};

std::string render_prometheus(const EngineMetrics& m, const ServerStats& s,
                              std::string_view model_name);

}  // namespace drift::server
