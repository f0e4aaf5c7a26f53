// The sampling options shared by the commands that generate (generate, chat): temperature,
// top-k/p, min-p, penalties, seed, ignore-eos, registered on a CLI11 subcommand.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>

#include "util/error.h"
#include "util/sampling_params.h"

namespace drift::cli {

struct SamplingOptions {
  SamplingParams params;
  std::optional<int32_t> top_k;
  std::optional<uint64_t> seed;
  bool ignore_eos = false;
};

// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --presence-penalty, --frequency-penalty,
// --seed, --ignore-eos.
void register_sampling_options(CLI::App& cmd, SamplingOptions& options);

// The validated parameters; the seed comes from the clock when none was given.
Expected<SamplingParams> to_sampling_params(const SamplingOptions& options);

}  // namespace drift::cli
