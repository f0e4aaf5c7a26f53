#include "model_locator.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>

namespace drift::cli {

std::string model_cache_dir() {
  if (const char* cache = std::getenv("DRIFT_CACHE"); cache != nullptr && *cache != '\0')
    return cache;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/drift";
}

Expected<std::string> resolve_model_path(const std::optional<std::string>& explicit_path) {
  namespace fs = std::filesystem;
  if (explicit_path) {
    if (!fs::exists(*explicit_path))
      return make_error("model file '{}' does not exist", *explicit_path);
    return *explicit_path;
  }
  std::string path = model_cache_dir() + "/" + kDefaultModelFile;
  if (fs::exists(path)) return path;
  std::string script = std::string(DRIFT_SOURCE_DIR) + "/scripts/fetch_models.sh";
  if (!fs::exists(script))
    return make_error(
        "no -m given, the default model is not in {} and the fetch script {} is "
        "missing; pass -m PATH",
        model_cache_dir(), script);
  spdlog::info("default model not in {}; fetching it with {}", model_cache_dir(), script);
  std::string command = "'" + script + "' default 1>&2";
  if (std::system(command.c_str()) != 0 || !fs::exists(path))
    return make_error("fetching the default model failed (see above); pass -m PATH");
  return path;
}

}  // namespace drift::cli
