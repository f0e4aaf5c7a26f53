#include "engine/sampling_defaults.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace drift {
namespace {

// llama.cpp's defaults (common/common.h, common_params_sampling), except penalty_last_n: drift
// keeps OpenAI's whole-history penalties (llama.cpp's 64 only matters once a penalty is set,
// and OpenAI clients set them meaning the whole text). See docs/design-notes.md.
SamplingParams llama_cpp_defaults() {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  return p;
}

// OpenAI's documented defaults (temperature 1, top_p 1, no penalties), filters in vLLM's order.
SamplingParams openai_defaults() {
  SamplingParams p;
  p.order.stages = {SamplerStage::kTemperature, SamplerStage::kTopK, SamplerStage::kTopP,
                    SamplerStage::kMinP};
  return p;
}

// Copies each set field of `layer` into `params` that an earlier (stronger) layer did not set,
// and records `source` for it.
void apply_layer(const SamplingSettings& layer, SamplingSource source, SamplingParams& p,
                 SamplingDefaults::Sources& s, SamplingSettings& taken) {
  auto take = [&](const auto& from, auto& taken_field, auto& to, SamplingSource& src) {
    if (!from || taken_field) return;
    taken_field = from;
    to = *from;
    src = source;
  };
  take(layer.temperature, taken.temperature, p.temperature, s.temperature);
  take(layer.top_p, taken.top_p, p.top_p, s.top_p);
  take(layer.min_p, taken.min_p, p.min_p, s.min_p);
  take(layer.repetition_penalty, taken.repetition_penalty, p.repetition_penalty,
       s.repetition_penalty);
  take(layer.penalty_last_n, taken.penalty_last_n, p.penalty_last_n, s.penalty_last_n);
  take(layer.presence_penalty, taken.presence_penalty, p.presence_penalty, s.presence_penalty);
  take(layer.frequency_penalty, taken.frequency_penalty, p.frequency_penalty, s.frequency_penalty);
  take(layer.order, taken.order, p.order, s.order);
  if (layer.top_k && !taken.top_k) {
    taken.top_k = layer.top_k;
    p.top_k = *layer.top_k > 0 ? std::optional<int32_t>(*layer.top_k) : std::nullopt;
    s.top_k = source;
  }
}

std::string format_value(float v) { return fmt::format("{:g}", v); }

}  // namespace

std::string_view sampling_defaults_base_name(SamplingDefaultsBase base) {
  switch (base) {
    case SamplingDefaultsBase::kModel:
      return "model";
    case SamplingDefaultsBase::kLlamaCpp:
      return "llama.cpp";
    case SamplingDefaultsBase::kOpenAI:
      return "openai";
  }
  return "?";
}

Expected<SamplingDefaultsBase> parse_sampling_defaults_base(std::string_view name) {
  if (name == "model") return SamplingDefaultsBase::kModel;
  if (name == "llama.cpp") return SamplingDefaultsBase::kLlamaCpp;
  if (name == "openai") return SamplingDefaultsBase::kOpenAI;
  return make_error("sampling defaults must be model, llama.cpp or openai, got \"{}\"", name);
}

std::string_view sampling_source_name(SamplingSource source) {
  switch (source) {
    case SamplingSource::kOperator:
      return "configured";
    case SamplingSource::kModel:
      return "model";
    case SamplingSource::kLlamaCpp:
      return "llama.cpp";
    case SamplingSource::kOpenAI:
      return "openai";
  }
  return "?";
}

SamplingParams SamplingDefaults::resolve(const SamplingSettings& request) const {
  SamplingParams p = params;
  Sources unused;
  SamplingSettings taken;
  apply_layer(request, SamplingSource::kOperator, p, unused, taken);
  p.seed = request.seed;
  p.stop_token_ids = request.stop_token_ids;
  p.ignore_eos = request.ignore_eos;
  p.logit_bias = request.logit_bias;
  p.logprobs = request.logprobs;
  return p;
}

std::vector<SamplingDefaults::Field> SamplingDefaults::fields() const {
  const SamplingParams& p = params;
  const Sources& s = sources;
  return {
      {"temperature", format_value(p.temperature), s.temperature},
      {"top_k", p.top_k ? fmt::format("{}", *p.top_k) : std::string("off"), s.top_k},
      {"top_p", format_value(p.top_p), s.top_p},
      {"min_p", format_value(p.min_p), s.min_p},
      {"repeat_penalty", format_value(p.repetition_penalty), s.repetition_penalty},
      {"penalty_last_n", fmt::format("{}", p.penalty_last_n), s.penalty_last_n},
      {"presence_penalty", format_value(p.presence_penalty), s.presence_penalty},
      {"frequency_penalty", format_value(p.frequency_penalty), s.frequency_penalty},
      {"order", sampler_order_string(p.order), s.order},
  };
}

std::string SamplingDefaults::describe() const {
  std::string out;
  for (const Field& f : fields()) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {} ({})", f.name, f.value, sampling_source_name(f.source));
  }
  return out;
}

Expected<SamplingDefaults> resolve_sampling_defaults(const SamplingSettings& operator_settings,
                                                     const SamplingSettings& recommended,
                                                     SamplingDefaultsBase base) {
  SamplingDefaults d;
  d.base = base;
  const bool openai = base == SamplingDefaultsBase::kOpenAI;
  const SamplingSource base_source = openai ? SamplingSource::kOpenAI : SamplingSource::kLlamaCpp;
  d.params = openai ? openai_defaults() : llama_cpp_defaults();
  d.sources =
      SamplingDefaults::Sources{base_source, base_source, base_source, base_source, base_source,
                                base_source, base_source, base_source, base_source};
  SamplingSettings taken;
  apply_layer(operator_settings, SamplingSource::kOperator, d.params, d.sources, taken);
  if (base == SamplingDefaultsBase::kModel)
    apply_layer(recommended, SamplingSource::kModel, d.params, d.sources, taken);
  if (Status s = d.params.validate(); !s.ok())
    return make_error("sampling defaults: {} (in force: {})", s.message(), d.describe());
  return d;
}

}  // namespace drift
