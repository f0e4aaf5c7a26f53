#include "sampling_options.h"

#include <chrono>

#include "engine/sampling_defaults.h"

namespace drift::cli {

void register_sampling_default_options(CLI::App& cmd, SamplingOptions& o) {
  SamplingSettings& d = o.defaults;
  cmd.add_option("--temp", d.temperature, "temperature (0: greedy; default: see below)");
  cmd.add_option("--top-k", d.top_k, "keep the k most likely tokens (0: no limit)");
  cmd.add_option("--top-p", d.top_p, "nucleus sampling mass (1: off)");
  cmd.add_option("--min-p", d.min_p, "drop tokens below min-p x the most likely one (0: off)");
  cmd.add_option("--repeat-penalty", d.repetition_penalty, "repetition penalty (1: off)");
  cmd.add_option("--repeat-last-n", d.penalty_last_n,
                 "penalties look at the last n tokens (-1: all, 0: penalties off)");
  cmd.add_option("--presence-penalty", d.presence_penalty, "presence penalty (0: off)");
  cmd.add_option("--frequency-penalty", d.frequency_penalty, "frequency penalty (0: off)");
  cmd.add_option("--sampling-defaults", o.defaults_base,
                 "defaults of the flags above: model (the GGUF's general.sampling.*, else "
                 "llama.cpp's: temp 0.8, top-k 40, top-p 0.95, min-p 0.05), llama.cpp, or "
                 "openai (temp 1, top-p 1, nothing else)")
      ->capture_default_str()
      ->check(CLI::IsMember({"model", "llama.cpp", "openai"}));
}

void register_sampling_options(CLI::App& cmd, SamplingOptions& o) {
  register_sampling_default_options(cmd, o);
  cmd.add_option("--seed", o.seed, "random seed (default: from the clock)");
  cmd.add_flag("--ignore-eos", o.ignore_eos, "keep generating past end-of-generation tokens");
}

Status apply_sampling_defaults(const SamplingOptions& o, EngineConfig& config) {
  DRIFT_ASSIGN_OR_RETURN(config.sampling_defaults, parse_sampling_defaults_base(o.defaults_base));
  config.sampling = o.defaults;
  return Status::Ok();
}

SamplingSettings request_sampling(const SamplingOptions& o) {
  SamplingSettings s;
  s.seed = o.seed.value_or(
      static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()));
  s.ignore_eos = o.ignore_eos;
  return s;
}

}  // namespace drift::cli
