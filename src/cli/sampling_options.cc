#include "sampling_options.h"

#include <chrono>

namespace drift::cli {

void register_sampling_options(CLI::App& cmd, SamplingOptions& o) {
  cmd.add_option("--temp", o.params.temperature, "temperature (0: greedy)")->capture_default_str();
  cmd.add_option("--top-k", o.top_k, "keep the k most likely tokens");
  cmd.add_option("--top-p", o.params.top_p, "nucleus sampling mass")->capture_default_str();
  cmd.add_option("--min-p", o.params.min_p, "drop tokens below min-p x the best")
      ->capture_default_str();
  cmd.add_option("--repeat-penalty", o.params.repetition_penalty, "repetition penalty")
      ->capture_default_str();
  cmd.add_option("--presence-penalty", o.params.presence_penalty, "presence penalty")
      ->capture_default_str();
  cmd.add_option("--frequency-penalty", o.params.frequency_penalty, "frequency penalty")
      ->capture_default_str();
  cmd.add_option("--seed", o.seed, "random seed (default: from the clock)");
  cmd.add_flag("--ignore-eos", o.ignore_eos, "keep generating past end-of-generation tokens");
}

Expected<SamplingParams> to_sampling_params(const SamplingOptions& o) {
  SamplingParams params = o.params;
  params.top_k = o.top_k;
  params.seed = o.seed.value_or(
      static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()));
  params.ignore_eos = o.ignore_eos;
  if (Status s = params.validate(); !s.ok()) return s.error();
  return params;
}

}  // namespace drift::cli
