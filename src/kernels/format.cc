#include "kernels/format.h"

namespace drift::kernels {
namespace {

constexpr FormatInfo kInfos[] = {
    {Format::kF32, "f32", 1, 4, true, Format::kF32},
    {Format::kF16, "f16", 1, 2, true, Format::kF16},
    {Format::kBF16, "bf16", 1, 2, true, Format::kBF16},
    {Format::kQ4_0, "q4_0", kQK, sizeof(BlockQ4_0), true, Format::kQ8_0},
    {Format::kQ4_1, "q4_1", kQK, sizeof(BlockQ4_1), true, Format::kQ8_1},
    {Format::kQ5_0, "q5_0", kQK, sizeof(BlockQ5_0), true, Format::kQ8_0},
    {Format::kQ5_1, "q5_1", kQK, sizeof(BlockQ5_1), true, Format::kQ8_1},
    {Format::kQ8_0, "q8_0", kQK, sizeof(BlockQ8_0), true, Format::kQ8_0},
    {Format::kQ8_1, "q8_1", kQK, sizeof(BlockQ8_1), false, Format::kQ8_1},
    {Format::kQ2_K, "q2_K", kQKK, sizeof(BlockQ2_K), true, Format::kQ8_K},
    {Format::kQ3_K, "q3_K", kQKK, sizeof(BlockQ3_K), true, Format::kQ8_K},
    {Format::kQ4_K, "q4_K", kQKK, sizeof(BlockQ4_K), true, Format::kQ8_K},
    {Format::kQ5_K, "q5_K", kQKK, sizeof(BlockQ5_K), true, Format::kQ8_K},
    {Format::kQ6_K, "q6_K", kQKK, sizeof(BlockQ6_K), true, Format::kQ8_K},
    {Format::kQ8_K, "q8_K", kQKK, sizeof(BlockQ8_K), false, Format::kQ8_K},
    {Format::kIQ4_NL, "iq4_nl", kQK, sizeof(BlockIQ4_NL), true, Format::kQ8_0},
    {Format::kIQ4_XS, "iq4_xs", kQKK, sizeof(BlockIQ4_XS), true, Format::kQ8_K},
    {Format::kMXFP4, "mxfp4", kQK, sizeof(BlockMXFP4), true, Format::kQ8_0},
};

}  // namespace

const FormatInfo* find_format(uint32_t ggml_type_id) {
  for (const FormatInfo& info : kInfos)
    if (static_cast<uint32_t>(info.format) == ggml_type_id) return &info;
  return nullptr;
}

const FormatInfo& format_info(Format format) {
  const FormatInfo* info = find_format(static_cast<uint32_t>(format));
  assert(info != nullptr && "Format value outside the enum");
  return *info;
}

int64_t row_bytes(Format format, int64_t k) {
  const FormatInfo& info = format_info(format);
  return k / info.block_size * info.block_bytes;
}

Expected<Format> weight_format_for(uint32_t ggml_type_id, int64_t k) {
  const FormatInfo* info = find_format(ggml_type_id);
  if (info == nullptr || !info->is_weight) {
    std::string supported;
    for (Format f : kWeightFormats) {
      if (!supported.empty()) supported += ", ";
      supported += format_info(f).name;
    }
    if (info != nullptr)
      return make_error(
          "tensor type {} is an activation format, not a weight format (supported: {})", info->name,
          supported);
    return make_error("ggml tensor type {} is not supported by drift's CPU kernels (supported: {})",
                      ggml_type_id, supported);
  }
  if (k <= 0 || k % info->block_size != 0)
    return make_error("a {} weight row needs a positive multiple of {} elements, got {}",
                      info->name, info->block_size, k);
  return info->format;
}

}  // namespace drift::kernels
