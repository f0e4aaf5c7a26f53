// The sampling a model's file recommends: its general.sampling.* metadata, read as llama.cpp reads
// it. The engine layers it between the operator's settings and its base defaults
// (engine/sampling_defaults.h); reading GGUF metadata is model/'s job, so the engine gets the
// settings only (ModelFacts::recommended_sampling), never the file.
#pragma once

#include <string>
#include <vector>

#include "util/sampling_params.h"

namespace drift {

class GgufFile;

// A model's sampling recommendation, and the keys drift could not use, each with the reason (an
// unknown sampler in the sequence, an out-of-range value, ...).
struct RecommendedSampling {
  SamplingSettings settings;
  std::vector<std::string> ignored;
};
RecommendedSampling read_recommended_sampling(const GgufFile& file);

}  // namespace drift
