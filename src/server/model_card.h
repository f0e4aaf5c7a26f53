// What the server tells clients about the model it serves beyond its name: Ollama's /api/tags,
// /api/show and /api/ps list it. The program that loads the model fills it from the GGUF file
// (cli/cmd_serve.cc); a service without one (tests over a fake engine) lists the name alone.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace drift::server {

struct ModelCard {
  uint64_t file_bytes = 0;
  int64_t modified_unix = 0;     // the file's modification time, Unix seconds
  std::string architecture;      // general.architecture ("llama", "qwen2", ...)
  uint64_t parameter_count = 0;  // the weights' elements, summed over tensors
  std::string quantization;      // the weight format holding most bytes ("Q4_1", "Q8_0", ...)
  std::string chat_template;     // the Jinja template the server renders chats with
  // general.* and <architecture>.* metadata with scalar values, as Ollama's model_info.
  nlohmann::json model_info = nlohmann::json::object();
};

}  // namespace drift::server
