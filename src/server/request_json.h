// The checks a request body passes before nlohmann parses it: well-formed UTF-8 (a body that is
// not is refused with 400, so nothing the client sent is silently altered) and a bounded nesting
// depth (a deeply nested body cannot exhaust the parser's stack or memory).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <variant>

#include "server/api_error.h"

namespace drift::server {

inline constexpr int kMaxJsonDepth = 64;

// Byte offset of the first byte that does not belong to a well-formed UTF-8 sequence (overlong
// forms, surrogates and values past U+10FFFF included); nullopt when the text is valid.
std::optional<size_t> find_invalid_utf8(std::string_view text);

// The deepest nesting of arrays and objects in `body`, counting only brackets outside strings.
// Stops counting once `limit` is exceeded (returns limit + 1).
int json_nesting_depth(std::string_view body, int limit);

// Parses a request body that must be a JSON object: UTF-8, depth and syntax are checked, each
// failure a 400 that says where.
std::variant<nlohmann::json, ApiError> parse_request_json(std::string_view body,
                                                          int max_depth = kMaxJsonDepth);

}  // namespace drift::server
