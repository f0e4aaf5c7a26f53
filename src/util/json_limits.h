// The one bound on JSON that drift parses from text it did not write: a request body, a JSON
// document sent inside a string field (a schema in guided_json, a tool call's arguments), a
// model's reply read as a tool call, an index fetched over the network. nlohmann's parser is
// iterative, but copying, comparing, dumping and converting a parsed value recurse once per level,
// so a value nested 60,000 deep parses fine and then overflows the stack of whichever thread
// touches it next. Every such text goes through parse_bounded_json, which measures the nesting on
// the text first and refuses what is too deep or too large before anything is built.
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "util/error.h"

namespace drift {

struct JsonLimits {
  // Arrays and objects inside one another; a request body's own nesting counts from 1. Deep enough
  // for any real schema or tool call, shallow enough that every recursive walk of the value stays
  // within a few kilobytes of stack.
  int max_depth = 64;
  size_t max_bytes = std::numeric_limits<size_t>::max();
};

// The deepest nesting of arrays and objects in `text`, counting only brackets outside strings.
// Stops counting once `limit` is exceeded (returns limit + 1). Unbalanced text is counted as far
// as it goes; rejecting it is the parser's job.
int json_nesting_depth(std::string_view text, int limit);

// Why a text was refused, for a message the caller prefixes with the field's name:
// "nests arrays/objects deeper than 64 levels", "has 70000 bytes; at most 65536 are accepted",
// "is not valid JSON: <the parser's reason>". nullopt when the text is within the limits (it may
// still fail to parse).
std::optional<std::string> json_limit_violation(std::string_view text, const JsonLimits& limits);

// Parses `text` as one JSON value of type `Json` (nlohmann::json or ordered_json) within `limits`.
// Never throws and never recurses deeper than limits.max_depth.
template <typename Json>
Expected<Json> parse_bounded_json(std::string_view text, const JsonLimits& limits = {}) {
  if (std::optional<std::string> violation = json_limit_violation(text, limits))
    return Error{std::move(*violation)};
  try {
    // allow_exceptions=false still throws out_of_range for a number past double's range (1e400).
    Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!value.is_discarded()) return value;
    // Parsed again with exceptions only to say where and why; reached for bad text alone.
    (void)Json::parse(text);
  } catch (const std::exception& e) {
    return make_error("is not valid JSON: {}", e.what());
  }
  return make_error("is not valid JSON");
}

}  // namespace drift
