// Where a command's model comes from: `-m PATH`, `-m NAME` (a name of the model registry,
// fetched into drift's cache, ~/.cache/drift or $DRIFT_CACHE, on first use), or without -m the
// registry's default model.
#pragma once

#include <optional>
#include <string>

#include "util/error.h"

namespace drift::cli {

std::string model_cache_dir();

// `model` if it is an existing file; else the registered model of that name (or the default
// one when absent), pulled first if it is not cached.
Expected<std::string> resolve_model_path(const std::optional<std::string>& model);

}  // namespace drift::cli
