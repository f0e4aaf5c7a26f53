// Where the model tests find the real GGUF models: $DRIFT_CACHE, else ~/.cache/drift (the
// directory scripts/fetch_models.sh fills). A missing model fails the test, with the path it
// looked at, rather than skipping it: a model test that silently skips has tested nothing.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace drift::test {

inline constexpr std::string_view kSmolLm2File = "SmolLM2-135M-Instruct.Q4_1.gguf";
inline constexpr std::string_view kGemma3File = "gemma-3-270m-q4_k_m.gguf";

inline std::filesystem::path model_cache_dir() {
  if (const char* cache = std::getenv("DRIFT_CACHE"); cache != nullptr && *cache != '\0') {
    return cache;
  }
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr ? home : ".") / ".cache" / "drift";
}

inline std::filesystem::path model_path(std::string_view file) {
  return model_cache_dir() / std::string(file);
}

// Use as ASSERT_TRUE(model_available(path)).
inline ::testing::AssertionResult model_available(const std::filesystem::path& path) {
  if (std::filesystem::is_regular_file(path)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "model file " << path << " is missing: run scripts/fetch_models.sh or point "
         << "DRIFT_CACHE at the directory that holds it";
}

}  // namespace drift::test
