// The checks a request body passes before nlohmann parses it: well-formed UTF-8 (a body that is
// not is refused with 400, so nothing the client sent is silently altered) and the bounds of
// util/json_limits.h (a deeply nested body cannot exhaust a thread's stack). JSON documents that
// arrive inside a body's strings (a schema, a tool call's arguments) go through
// parse_json_field, under the same bounds.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <variant>

#include "server/api_error.h"
#include "util/json_limits.h"
#include "util/utf8.h"

namespace drift::server {

// Parses a request body that must be a JSON object: UTF-8, depth and syntax are checked, each
// failure a 400 that says where. `Json`: nlohmann::json, or nlohmann::ordered_json where the
// client's key order matters (jinja::Json).
template <typename Json = nlohmann::json>
std::variant<Json, ApiError> parse_request_json(std::string_view body,
                                                const JsonLimits& limits = {}) {
  // Well-formed only (no overlong forms, surrogates or values past U+10FFFF): util/utf8's strict
  // check, which stops at the first byte that does not belong.
  if (const size_t valid = valid_utf8_prefix_length(body); valid != body.size())
    return bad_request(fmt::format("the request body is not valid UTF-8 (byte offset {})", valid));
  Expected<Json> json = parse_bounded_json<Json>(body, limits);
  if (!json.ok()) return bad_request(fmt::format("the request body {}", json.error().message));
  if (!json->is_object()) return bad_request("the request body must be a JSON object");
  return std::move(json).value();
}

// Parses the JSON text a string field of the body holds (its UTF-8 was checked with the body);
// a 400 naming `param` when it is too deep, too large or not JSON.
template <typename Json>
std::variant<Json, ApiError> parse_json_field(std::string_view text, std::string_view param,
                                              const JsonLimits& limits = {}) {
  Expected<Json> parsed = parse_bounded_json<Json>(text, limits);
  if (!parsed.ok())
    return bad_request(fmt::format("'{}' holds a JSON text that {}", param, parsed.error().message),
                       param);
  return std::move(parsed).value();
}

}  // namespace drift::server
