#include "server/sse.h"

namespace drift::server {

std::string sse_event(std::string_view json) {
  std::string out;
  out.reserve(json.size() + 8);
  out.append("data: ").append(json).append("\n\n");
  return out;
}

std::string sse_done() { return "data: [DONE]\n\n"; }

std::string sse_named_event(std::string_view name, std::string_view json) {
  std::string out;
  out.reserve(name.size() + json.size() + 16);
  out.append("event: ").append(name).append("\n").append(sse_event(json));
  return out;
}

}  // namespace drift::server
