// A loaded model: the mapped GGUF file, its configuration and its weights bound for one ISA.
#pragma once

#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "util/cpu_features.h"
#include "util/error.h"

namespace drift {

class Model {
 public:
  static Expected<std::unique_ptr<Model>> load(const std::string& path, Isa isa);

  const GgufFile& file() const { return file_; }
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  Isa isa() const { return isa_; }

 private:
  Model(GgufFile file, Isa isa) : file_(std::move(file)), isa_(isa) {}

  GgufFile file_;
  Isa isa_;
  ModelConfig config_;
  ModelWeights weights_;
};

}  // namespace drift
