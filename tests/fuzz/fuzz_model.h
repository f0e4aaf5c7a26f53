// The model whose vocabulary a fuzz target uses: $DRIFT_FUZZ_TOKENIZER_GGUF, else the cached
// SmolLM2 (${DRIFT_CACHE:-~/.cache/drift}), as scripts/run_fuzzers.sh passes them.
#pragma once

#include <cstdlib>
#include <string>

namespace drift::fuzz {

inline std::string model_path() {
  if (const char* path = std::getenv("DRIFT_FUZZ_TOKENIZER_GGUF")) return path;
  const char* cache = std::getenv("DRIFT_CACHE");
  const char* home = std::getenv("HOME");
  return (cache ? std::string(cache) : std::string(home ? home : ".") + "/.cache/drift") +
         "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace drift::fuzz
