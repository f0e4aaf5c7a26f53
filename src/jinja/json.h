// JSON in and out of the interpreter: request data (messages, tools, extra context) becomes
// template values, and the `tojson` filter serialises values exactly as Python's
// json.dumps(x, ensure_ascii=False, ...) does, which is what Hugging Face's chat templates use.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "jinja/value.h"
#include "util/error.h"

namespace drift::jinja {

// ordered_json keeps object keys in their original order, as Python dicts do; tojson output of a
// tool schema depends on it. (nlohmann::json converts implicitly, but sorts its keys.)
using Json = nlohmann::ordered_json;

// Converts JSON to a value; nesting deeper than `max_depth` is an error (every recursion over a
// value is bounded by its depth). Integers outside int64 become an error, as drift's integers
// are 64-bit.
Expected<Value> value_from_json(const Json& json, uint32_t max_depth);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // none: one line; otherwise newline + indent per level
  std::string item_separator = ", ";  // Python's defaults: ", " and ": " (",", ": " if indented)
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// json.dumps(value, ...). Undefined, namespaces, loops, functions and generators are not
// serialisable (an error, as in Python). The result may not exceed `max_bytes`.
Expected<std::string> json_dumps(const Value& value, const JsonDumpOptions& options,
                                 size_t max_bytes);

}  // namespace drift::jinja
