#include "util/sampling_params.h"

namespace drift {

std::string_view sampler_stage_name(SamplerStage stage) {
  switch (stage) {
    case SamplerStage::kTopK:
      return "top_k";
    case SamplerStage::kTopP:
      return "top_p";
    case SamplerStage::kMinP:
      return "min_p";
    case SamplerStage::kTemperature:
      return "temperature";
  }
  return "?";
}

std::string sampler_order_string(const SamplerOrder& order) {
  std::string out;
  for (SamplerStage stage : order.stages) {
    if (!out.empty()) out += ';';
    out += sampler_stage_name(stage);
  }
  return out;
}

}  // namespace drift
