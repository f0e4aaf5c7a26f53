// Reading fields of a request body, shared by every API's schema (OpenAI's completions and
// embeddings, Anthropic's messages, Ollama's requests): the JSON kind a wrong value had, the 400
// that names the field, null as absent, ranged numbers, and the bounds on stop strings. Templates
// over the JSON type, since Anthropic's and Ollama's readers keep keys in order (jinja::Json) and
// the others do not (nlohmann::json).
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <optional>
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

// The integer field `name` of `object` in [lo, hi] into `out` (left alone when absent); `param`
// names it in a 400 ("options.top_k").
template <typename Json>
std::optional<ApiError> read_int_field(const Json& object, std::string_view name,
                                       std::string_view param, int64_t lo, int64_t hi,
                                       std::optional<int64_t>& out) {
  const Json* v = field(object, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer() && !v->is_number_unsigned())
    return wrong_type(param, "an integer", *v);
  // JSON's non-negative integers parse as unsigned: compare each kind in its own type.
  const bool in_range = v->is_number_unsigned()
                            ? v->template get<uint64_t>() <= uint64_t(hi) &&
                                  (lo <= 0 || v->template get<uint64_t>() >= uint64_t(lo))
                            : v->template get<int64_t>() <= hi && v->template get<int64_t>() >= lo;
  if (!in_range)
    return bad_request(fmt::format("'{}' must be in [{}, {}], got {}", param, lo, hi, v->dump()),
                       param);
  out = v->template get<int64_t>();
  return std::nullopt;
}

// The number field `name` of `object` in [lo, hi] (or (lo, hi] when lo_open) into `out`.
template <typename Json>
std::optional<ApiError> read_number_field(const Json& object, std::string_view name,
                                          std::string_view param, double lo, double hi,
                                          bool lo_open, std::optional<float>& out) {
  const Json* v = field(object, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) return wrong_type(param, "a number", *v);
  const double x = v->template get<double>();
  if (!std::isfinite(x) || (lo_open ? x <= lo : x < lo) || x > hi)
    return bad_request(
        fmt::format("'{}' must be in {}{}, {}], got {}", param, lo_open ? "(" : "[", lo, hi, x),
        param);
  out = float(x);
  return std::nullopt;
}

// The string field `name` of `object` into `out`, left alone when absent or null; `param` names
// it in a 400 ("options.stop").
template <typename Json>
std::optional<ApiError> read_string_field(const Json& object, std::string_view name,
                                          std::string_view param, std::optional<std::string>& out) {
  const Json* v = field(object, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) return wrong_type(param, "a string", *v);
  out = v->template get<std::string>();
  return std::nullopt;
}

// The boolean field `name` of `object` into `out` (a bool or an optional one), as above.
template <typename Json, typename Bool>
std::optional<ApiError> read_bool_field(const Json& object, std::string_view name,
                                        std::string_view param, Bool& out) {
  const Json* v = field(object, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return wrong_type(param, "a boolean", *v);
  out = v->template get<bool>();
  return std::nullopt;
}

// Appends the stop strings `items` (the elements of field `name`) to `out`. Only their type is
// checked here: their number and sizes are the engine's to judge (a kInvalidStop refusal, which
// names the field: rejection_error.h).
template <typename Json>
std::optional<ApiError> read_stop_strings(const std::vector<const Json*>& items,
                                          std::string_view name, std::string_view expected,
                                          std::vector<std::string>& out) {
  for (const Json* s : items) {
    if (!s->is_string()) return wrong_type(name, expected, *s);
    out.push_back(s->template get_ref<const std::string&>());
  }
  return std::nullopt;
}

}  // namespace drift::server
