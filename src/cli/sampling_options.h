// The sampling options of the commands that generate (generate, chat) and serve. The sampling
// flags (--temp, --top-k, ...) set the engine's defaults — what every request that does not set
// a field itself gets — so a flag beats the model's recommendation and llama.cpp's defaults
// (engine/sampling_defaults.h), as llama-server's flags do; a flag not given leaves the field to
// them. generate and chat also take --seed and --ignore-eos for their own requests.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/engine_config.h"
#include "util/error.h"
#include "util/sampling_params.h"

namespace drift::cli {

struct SamplingOptions {
  SamplingSettings defaults;            // the sampling flags given
  std::string defaults_base = "model";  // --sampling-defaults model|llama.cpp|openai
  std::optional<uint64_t> seed;
  bool ignore_eos = false;
};

// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, --presence-penalty,
// --frequency-penalty, --sampling-defaults.
void register_sampling_default_options(CLI::App& cmd, SamplingOptions& options);
// The above, plus --seed and --ignore-eos.
void register_sampling_options(CLI::App& cmd, SamplingOptions& options);

// Puts the flags into the engine's sampling defaults (validated when the engine is set up).
Status apply_sampling_defaults(const SamplingOptions& options, EngineConfig& config);

// The sampling of one request of generate/chat: the seed (from the clock when none was given)
// and ignore_eos; every other field is left to the engine's defaults.
SamplingSettings request_sampling(const SamplingOptions& options);

}  // namespace drift::cli
