// Where a command's model comes from: `-m PATH`, or the default model in drift's cache
// (~/.cache/drift or $DRIFT_CACHE), fetched by scripts/fetch_models.sh when missing.
#pragma once

#include <optional>
#include <string>

#include "util/error.h"

namespace drift::cli {

inline constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

std::string model_cache_dir();

// Returns `explicit_path` if given (it must exist), else the cached default model, running the
// fetch script (with its progress on stderr) if it is not there yet.
Expected<std::string> resolve_model_path(const std::optional<std::string>& explicit_path);

}  // namespace drift::cli
