#include "server/request_json.h"

#include <fmt/format.h>

#include <cstdint>

namespace drift::server {

std::optional<size_t> find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;  // a continuation byte without a lead, or 0xF8..0xFF
    }
    if (n - i < len) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    static constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::nullopt;
}

int json_nesting_depth(std::string_view body, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
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
      --depth;  // unbalanced input is the parser's to reject
    }
  }
  return deepest;
}

std::variant<nlohmann::json, ApiError> parse_request_json(std::string_view body, int max_depth) {
  if (auto bad = find_invalid_utf8(body))
    return bad_request(fmt::format("the request body is not valid UTF-8 (byte offset {})", *bad));
  if (json_nesting_depth(body, max_depth) > max_depth)
    return bad_request(
        fmt::format("the request body nests arrays/objects deeper than {} levels", max_depth));
  nlohmann::json json;
  try {
    // A number beyond double's range (1e400) throws out_of_range even without exceptions.
    json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  } catch (const nlohmann::json::exception& e) {
    return bad_request(fmt::format("the request body is not valid JSON: {}", e.what()));
  }
  if (json.is_discarded()) {
    // Parse again with exceptions for the position and reason; only reached for a bad body.
    try {
      (void)nlohmann::json::parse(body);
    } catch (const nlohmann::json::exception& e) {
      return bad_request(fmt::format("the request body is not valid JSON: {}", e.what()));
    }
    return bad_request("the request body is not valid JSON");
  }
  if (!json.is_object()) return bad_request("the request body must be a JSON object");
  return json;
}

}  // namespace drift::server
