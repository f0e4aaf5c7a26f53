#include "model/recommended_sampling.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <optional>

#include "gguf/gguf_file.h"

namespace drift {
namespace {

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

}  // namespace

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

}  // namespace drift
