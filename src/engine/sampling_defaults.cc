#include "engine/sampling_defaults.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "gguf/gguf_file.h"

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

// A number from a metadata value: any integer or float type, or a string holding a number
// (llama.cpp reads these keys through their string form, so "40" works there too).
std::optional<double> number_of(const GgufValue& v) {
  switch (v.type) {
    case GgufType::kUint8:
    case GgufType::kUint16:
    case GgufType::kUint32:
    case GgufType::kUint64:
      return double(v.u);
    case GgufType::kInt8:
    case GgufType::kInt16:
    case GgufType::kInt32:
    case GgufType::kInt64:
      return double(v.i);
    case GgufType::kFloat32:
    case GgufType::kFloat64:
      return v.f;
    case GgufType::kString: {
      std::string text(v.s);
      char* end = nullptr;
      double d = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0') return std::nullopt;
      return d;
    }
    default:
      return std::nullopt;
  }
}

// The sampler names llama.cpp accepts in general.sampling.sequence (common_sampler_types_from_
// names: canonical, kebab-case, no-dash and a few aliases) that drift implements.
std::optional<SamplerStage> stage_named(std::string_view name) {
  if (name == "top_k" || name == "top-k" || name == "topk") return SamplerStage::kTopK;
  if (name == "top_p" || name == "top-p" || name == "topp" || name == "nucleus")
    return SamplerStage::kTopP;
  if (name == "min_p" || name == "min-p" || name == "minp") return SamplerStage::kMinP;
  if (name == "temperature" || name == "temp") return SamplerStage::kTemperature;
  return std::nullopt;
}

// general.sampling.sequence: sampler names separated by ';'. Named stages come in that order,
// the ones it leaves out follow in the default order (so no request field is ever ignored).
SamplerOrder parse_sequence(std::string_view text, std::vector<std::string>& ignored) {
  SamplerOrder order;
  int n = 0;
  bool seen[kNumSamplerStages] = {};
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view name = text.substr(start, end - start);
    start = end + 1;
    if (name.empty()) continue;
    if (std::optional<SamplerStage> stage = stage_named(name)) {
      if (!seen[int(*stage)]) order.stages[size_t(n++)] = *stage;
      seen[int(*stage)] = true;
    } else if (name == "penalties") {
      // drift always applies penalties first, on the raw logits.
      if (n > 0)
        ignored.push_back(
            "general.sampling.sequence: \"penalties\" after other samplers (drift applies "
            "penalties first)");
    } else {
      ignored.push_back(fmt::format(
          "general.sampling.sequence: sampler \"{}\" (drift implements top_k, top_p, min_p, "
          "temperature and penalties)",
          name));
    }
  }
  for (SamplerStage stage : SamplerOrder{}.stages)
    if (!seen[int(stage)]) order.stages[size_t(n++)] = stage;
  return order;
}

// Sets `out` from `key` if it holds a number that passes `valid` (which returns an empty string
// or why not); otherwise records why the key was ignored.
template <typename T>
void read_number(const GgufFile& file, std::string_view key, std::optional<T>& out,
                 std::vector<std::string>& ignored, auto valid) {
  const GgufValue* v = file.find(key);
  if (!v) return;
  std::optional<double> d = number_of(*v);
  if (!d || !std::isfinite(*d)) {
    ignored.push_back(fmt::format("{}: not a number ({})", key, v->to_display_string()));
    return;
  }
  if (std::string why = valid(*d); !why.empty()) {
    ignored.push_back(fmt::format("{}: {} {}", key, *d, why));
    return;
  }
  out = T(*d);
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

RecommendedSampling read_recommended_sampling(const GgufFile& file) {
  RecommendedSampling r;
  SamplingSettings& s = r.settings;
  auto any = [](double) { return std::string(); };
  auto in_unit = [](double d) {
    return d > 0 && d <= 1 ? std::string() : std::string("is outside (0, 1]");
  };
  auto in_closed_unit = [](double d) {
    return d >= 0 && d <= 1 ? std::string() : std::string("is outside [0, 1]");
  };
  auto integer = [](double d) {
    return d == std::floor(d) && std::abs(d) < 2e9 ? std::string() : std::string("is not an int");
  };
  auto window = [&](double d) {  // llama.cpp: -1 the whole context, 0 off, n the last n
    return !integer(d).empty() ? integer(d) : d < -1 ? std::string("is below -1") : std::string();
  };
  // llama.cpp: top_k <= 0 means no limit, as 0 does here.
  read_number(file, "general.sampling.top_k", s.top_k, r.ignored, integer);
  if (s.top_k && *s.top_k < 0) s.top_k = 0;
  read_number(file, "general.sampling.top_p", s.top_p, r.ignored, in_unit);
  read_number(file, "general.sampling.min_p", s.min_p, r.ignored, in_closed_unit);
  // llama.cpp samples greedily at temp <= 0, as drift does at 0.
  read_number(file, "general.sampling.temp", s.temperature, r.ignored, any);
  if (s.temperature && *s.temperature < 0) s.temperature = 0.0f;
  read_number(file, "general.sampling.penalty_last_n", s.penalty_last_n, r.ignored, window);
  read_number(file, "general.sampling.penalty_repeat", s.repetition_penalty, r.ignored,
              [](double d) { return d > 0 ? std::string() : std::string("is not > 0"); });
  if (const GgufValue* v = file.find("general.sampling.sequence")) {
    if (v->type == GgufType::kString)
      s.order = parse_sequence(v->s, r.ignored);
    else
      r.ignored.push_back("general.sampling.sequence: not a string");
  }
  // Samplers drift does not have: say so rather than pretend.
  for (std::string_view key : {"general.sampling.xtc_probability", "general.sampling.xtc_threshold",
                               "general.sampling.mirostat", "general.sampling.mirostat_tau",
                               "general.sampling.mirostat_eta"}) {
    if (file.find(key)) r.ignored.push_back(fmt::format("{}: drift has no such sampler", key));
  }
  return r;
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
