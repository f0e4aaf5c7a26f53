#include "server/embedding_schema.h"

#include <fmt/format.h>

#include <limits>

#include "server/json_fields.h"

namespace drift::server {
namespace {

using nlohmann::json;
using MaybeError = std::optional<ApiError>;

constexpr std::string_view kInputTypes =
    "a string, an array of strings, an array of token ids or an array of such arrays";

// An integer field's value, or -1 when it is beyond int32 (nlohmann keeps parsed non-negative
// integers unsigned, and integers built in C++ signed).
int64_t int32_value(const json& v) {
  if (v.is_number_unsigned())
    return v.get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max())
               ? -1
               : int64_t(v.get<uint64_t>());
  const int64_t x = v.get<int64_t>();
  return x > std::numeric_limits<int32_t>::max() ? -1 : x;
}

// One input given as token ids: a non-empty array of integers in [0, 2^31).
MaybeError parse_token_ids(const json& v, std::vector<int32_t>& out) {
  if (v.empty()) return bad_request("'input' must not hold an empty array of token ids", "input");
  for (const json& t : v) {
    if (!t.is_number_integer() && !t.is_number_unsigned())
      return wrong_type("input", kInputTypes, t);
    const int64_t id = int32_value(t);
    if (id < 0)
      return bad_request(
          fmt::format("'input' holds token id {}, which is not a valid id", t.dump()), "input");
    out.push_back(int32_t(id));
  }
  return std::nullopt;
}

MaybeError parse_text(const json& v, std::vector<PromptInput>& inputs) {
  const std::string& text = v.get_ref<const std::string&>();
  if (text.empty()) return bad_request("'input' must not hold an empty string", "input");
  inputs.emplace_back(text);
  return std::nullopt;
}

MaybeError parse_input(const json& body, std::vector<PromptInput>& inputs) {
  const json* v = field(body, "input");
  if (!v) return bad_request("'input' is required", "input");
  if (v->is_string()) return parse_text(*v, inputs);
  if (!v->is_array()) return wrong_type("input", kInputTypes, *v);
  if (v->empty()) return bad_request("'input' must not be an empty array", "input");
  if (v->front().is_number()) {  // one input as token ids
    std::vector<int32_t> ids;
    if (auto e = parse_token_ids(*v, ids)) return e;
    inputs.emplace_back(std::move(ids));
    return std::nullopt;
  }
  if (v->size() > kMaxEmbeddingInputs)
    return bad_request(
        fmt::format("'input' may hold at most {} inputs, got {}", kMaxEmbeddingInputs, v->size()),
        "input");
  for (const json& item : *v) {
    if (item.is_string()) {
      if (auto e = parse_text(item, inputs)) return e;
    } else if (item.is_array()) {
      std::vector<int32_t> ids;
      if (auto e = parse_token_ids(item, ids)) return e;
      inputs.emplace_back(std::move(ids));
    } else {
      return wrong_type("input", kInputTypes, item);
    }
  }
  return std::nullopt;
}

}  // namespace

std::variant<EmbeddingRequest, ApiError> parse_embedding_request(const json& body) {
  EmbeddingRequest r;
  if (const json* model = field(body, "model")) {
    if (!model->is_string()) return wrong_type("model", "a string", *model);
    r.model = model->get<std::string>();
  }
  if (auto e = parse_input(body, r.inputs)) return *e;
  if (const json* format = field(body, "encoding_format")) {
    if (!format->is_string()) return wrong_type("encoding_format", "a string", *format);
    const std::string& name = format->get_ref<const std::string&>();
    if (name == "float") {
      r.encoding = EmbeddingEncoding::kFloat;
    } else if (name == "base64") {
      r.encoding = EmbeddingEncoding::kBase64;
    } else {
      return bad_request(
          fmt::format("'encoding_format' must be \"float\" or \"base64\", got \"{}\"", name),
          "encoding_format");
    }
  }
  if (const json* dims = field(body, "dimensions")) {
    if (!dims->is_number_integer() && !dims->is_number_unsigned())
      return wrong_type("dimensions", "an integer", *dims);
    const int64_t value = int32_value(*dims);
    if (value < 1)
      return bad_request(fmt::format("'dimensions' must be in [1, {}], got {}",
                                     std::numeric_limits<int32_t>::max(), dims->dump()),
                         "dimensions");
    r.dimensions = value;
  }
  if (const json* user = field(body, "user"); user && !user->is_string())
    return wrong_type("user", "a string", *user);
  return r;
}

}  // namespace drift::server
