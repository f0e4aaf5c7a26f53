// Reading fields of a request body, shared by every API's schema (OpenAI's completions and
// embeddings, Anthropic's messages): the JSON kind a wrong value had, the 400 that names the
// field, null as absent, and the bounds on stop strings. Templates over the JSON type, since
// Anthropic's reader keeps keys in order (jinja::Json) and the others do not (nlohmann::json).
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "server/api_error.h"

namespace drift::server {

// "a string", "an integer", ...: how a 400 describes the value it got.
template <typename Json>
std::string_view json_type_name(const Json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

template <typename Json>
ApiError wrong_type(std::string_view name, std::string_view expected, const Json& v) {
  return bad_request(fmt::format("'{}' must be {}, got {}", name, expected, json_type_name(v)),
                     name);
}

// The field `name` of `object`, or null when it is missing or null (both APIs' SDKs treat a
// null optional field as omitted).
template <typename Json>
const Json* field(const Json& object, std::string_view name) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

// Appends the stop strings `items` (the elements of field `name`) to `out`, within the engine's
// bounds (kMaxStopStrings of 1 to kMaxStopStringBytes bytes each); `noun` names one in a message.
template <typename Json>
std::optional<ApiError> read_stop_strings(const std::vector<const Json*>& items,
                                          std::string_view name, std::string_view noun,
                                          std::string_view expected,
                                          std::vector<std::string>& out) {
  if (items.size() > kMaxStopStrings)
    return bad_request(fmt::format("'{}' may hold at most {} strings, got {}", name,
                                   kMaxStopStrings, items.size()),
                       name);
  for (const Json* s : items) {
    if (!s->is_string()) return wrong_type(name, expected, *s);
    const std::string& text = s->template get_ref<const std::string&>();
    if (text.empty() || text.size() > kMaxStopStringBytes)
      return bad_request(fmt::format("each {} must have 1 to {} bytes, got {}", noun,
                                     kMaxStopStringBytes, text.size()),
                         name);
    out.push_back(text);
  }
  return std::nullopt;
}

}  // namespace drift::server
