#include "server/sse.h"

namespace drift::server {

std::string sse_event(std::string_view json) {
  std::string out;
  out.reserve(json.size() + 8);
  out.append("data: ").append(json).append("\n\n");
  return out;
}

std::string sse_done() { return "data: [DONE]\n\n"; }

}  // namespace drift::server
