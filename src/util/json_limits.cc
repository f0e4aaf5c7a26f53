#include "util/json_limits.h"

#include <fmt/format.h>

#include <optional>

namespace drift {

int json_nesting_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest > limit) return limit + 1;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

std::optional<std::string> json_limit_violation(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes)
    return fmt::format("has {} bytes; at most {} are accepted", text.size(), limits.max_bytes);
  if (json_nesting_depth(text, limits.max_depth) > limits.max_depth)
    return fmt::format("nests arrays/objects deeper than {} levels", limits.max_depth);
  return std::nullopt;
}

}  // namespace drift
