// What a request that leaves a sampling field unset gets. Decided once, when the engine is set
// up, so the CLI, the server and the Python package share one answer (the server keeps no copy):
//
//   1. the operator's settings (flags such as `drift serve --temp 0.7`), then
//   2. the model's recommendation, its general.sampling.* metadata (as llama.cpp reads it; read by
//      model/recommended_sampling.h into ModelFacts::recommended_sampling), then
//   3. llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05 — which small
//      models need to answer coherently; sampling from the full distribution turns them to word
//      salad.
//
// `--sampling-defaults openai` replaces 2 and 3 by OpenAI's plain defaults (temperature 1, top-p
// 1, nothing else, temperature applied first as vLLM does) for clients that expect exactly those;
// `llama.cpp` skips the model's recommendation. A request's own fields always win.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"
#include "util/sampling_params.h"

namespace drift {

// What the defaults fall back to (--sampling-defaults).
enum class SamplingDefaultsBase {
  kModel,     // the model's recommendation, else llama.cpp's defaults
  kLlamaCpp,  // llama.cpp's defaults, whatever the model recommends
  kOpenAI,    // temperature 1, top-p 1, nothing else
};
std::string_view sampling_defaults_base_name(SamplingDefaultsBase base);  // model|llama.cpp|openai
Expected<SamplingDefaultsBase> parse_sampling_defaults_base(std::string_view name);

// Where one default came from: the operator's configuration (EngineConfig::sampling, i.e. the
// command-line flags), the model's file, or the base.
enum class SamplingSource { kOperator, kModel, kLlamaCpp, kOpenAI };
// configured|model|llama.cpp|openai
std::string_view sampling_source_name(SamplingSource source);

// The defaults in force: a value for every field that has one, and where each came from.
struct SamplingDefaults {
  struct Sources {
    SamplingSource temperature = SamplingSource::kLlamaCpp;
    SamplingSource top_k = SamplingSource::kLlamaCpp;
    SamplingSource top_p = SamplingSource::kLlamaCpp;
    SamplingSource min_p = SamplingSource::kLlamaCpp;
    SamplingSource repetition_penalty = SamplingSource::kLlamaCpp;
    SamplingSource penalty_last_n = SamplingSource::kLlamaCpp;
    SamplingSource presence_penalty = SamplingSource::kLlamaCpp;
    SamplingSource frequency_penalty = SamplingSource::kLlamaCpp;
    SamplingSource order = SamplingSource::kLlamaCpp;
  };

  SamplingDefaultsBase base = SamplingDefaultsBase::kModel;
  // The defaulted fields (seed, stop_token_ids, ignore_eos and logprobs are the request's own).
  SamplingParams params;
  Sources sources;

  // The request's sampling: its own fields, every unset one from these defaults. Not validated
  // (SamplingParams::validate names a bad field).
  SamplingParams resolve(const SamplingSettings& request) const;
  // Each defaulted field printed: {"top_k", "40", kLlamaCpp}; top_k "off" when unlimited.
  struct Field {
    std::string_view name;
    std::string value;
    SamplingSource source;
  };
  std::vector<Field> fields() const;
  // One line: "temperature 0.8 (llama.cpp), top_k 40 (llama.cpp), ..., order
  // top_k;top_p;min_p;temperature (llama.cpp)".
  std::string describe() const;
};

// Layers `operator_settings` over the model's recommendation (unless the base skips it) over the
// base, and validates the result (the error names the field and where its value came from).
Expected<SamplingDefaults> resolve_sampling_defaults(const SamplingSettings& operator_settings,
                                                     const SamplingSettings& recommended,
                                                     SamplingDefaultsBase base);

}  // namespace drift
