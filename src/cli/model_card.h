// The served model's card (server/model_card.h) read from its GGUF file: what Ollama's listings
// (/api/tags, /api/show, /api/ps) say of it.
#pragma once

#include <optional>
#include <string>

#include "server/model_card.h"
#include "util/error.h"

namespace drift::cli {

// `chat_template`: the template the server renders with when it is not the file's
// (--chat-template).
Expected<server::ModelCard> read_model_card(const std::string& path,
                                            const std::optional<std::string>& chat_template);

}  // namespace drift::cli
