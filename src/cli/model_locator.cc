#include "model_locator.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>

#include "model_pull.h"
#include "model_registry.h"

namespace drift::cli {

std::string model_cache_dir() {
  if (const char* cache = std::getenv("DRIFT_CACHE"); cache != nullptr && *cache != '\0')
    return cache;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/drift";
}

Expected<std::string> resolve_model_path(const std::optional<std::string>& model) {
  namespace fs = std::filesystem;
  if (model && fs::exists(*model)) return *model;
  const bool looks_like_path =
      model && (model->find('/') != std::string::npos || model->ends_with(".gguf"));
  if (looks_like_path) return make_error("model file '{}' does not exist", *model);
  Expected<ModelRegistry> registry = load_model_registry(model_registry_path());
  if (!registry.ok())
    return make_error("{} is not a file, and the model registry cannot be read: {}",
                      model ? "'" + *model + "'" : std::string("no -m given; it"),
                      registry.error().message);
  const std::string name = model.value_or(registry->default_name);
  const RegisteredModel* entry = registry->find(name);
  if (entry == nullptr)
    return make_error("'{}' is neither a file nor a model name (`drift list` shows the names)",
                      name);
  // A file under a registered name is only ever created complete and verified (model_pull.h),
  // so it is used as it is; `drift pull` checks it again.
  const std::string path = cached_model_path(*entry, model_cache_dir());
  if (fs::exists(path)) return path;
  spdlog::info("{} is not in {}; pulling it", name, model_cache_dir());
  return pull_model(*entry, model_cache_dir(), model_index_url());
}

}  // namespace drift::cli
