// /v1/embeddings request bodies -> validated values, as OpenAI's API defines them: `input` (a
// string, a list of strings, a list of token ids or a list of such lists), `model`,
// `encoding_format` ("float" or "base64"), `dimensions` and `user` (accepted and ignored). Each
// field is type- and range-checked with a 400 that names it. Limits that depend on the model
// (context length, vocabulary, the hidden size `dimensions` must equal) are checked later, by the
// service and the engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "server/api_error.h"
#include "server/openai_schema.h"

namespace drift::server {

// Inputs of one embeddings request at most (OpenAI's own limit).
inline constexpr size_t kMaxEmbeddingInputs = 2048;

enum class EmbeddingEncoding : uint8_t {
  kFloat,   // a JSON array of numbers
  kBase64,  // the little-endian float32 bytes, base64-encoded (what OpenAI's clients ask for)
};

struct EmbeddingRequest {
  std::optional<std::string> model;
  std::vector<PromptInput> inputs;  // 1 to kMaxEmbeddingInputs, none empty
  EmbeddingEncoding encoding = EmbeddingEncoding::kFloat;
  std::optional<int64_t> dimensions;  // >= 1 when given
};

std::variant<EmbeddingRequest, ApiError> parse_embedding_request(const nlohmann::json& body);

}  // namespace drift::server
