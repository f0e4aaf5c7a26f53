#include "kernels/format.h"

#include <gtest/gtest.h>

namespace drift::kernels {
namespace {

TEST(Format, InfoMatchesGgmlGeometry) {
  struct Expect {
    Format f;
    int64_t block_size, block_bytes;
    Format activation;
  };
  const Expect cases[] = {
      {Format::kF32, 1, 4, Format::kF32},         {Format::kF16, 1, 2, Format::kF16},
      {Format::kBF16, 1, 2, Format::kBF16},       {Format::kQ4_0, 32, 18, Format::kQ8_0},
      {Format::kQ4_1, 32, 20, Format::kQ8_1},     {Format::kQ5_0, 32, 22, Format::kQ8_0},
      {Format::kQ5_1, 32, 24, Format::kQ8_1},     {Format::kQ8_0, 32, 34, Format::kQ8_0},
      {Format::kQ8_1, 32, 36, Format::kQ8_1},     {Format::kQ4_K, 256, 144, Format::kQ8_K},
      {Format::kQ5_K, 256, 176, Format::kQ8_K},   {Format::kQ6_K, 256, 210, Format::kQ8_K},
      {Format::kQ8_K, 256, 292, Format::kQ8_K},   {Format::kQ2_K, 256, 84, Format::kQ8_K},
      {Format::kQ3_K, 256, 110, Format::kQ8_K},   {Format::kIQ4_NL, 32, 18, Format::kQ8_0},
      {Format::kIQ4_XS, 256, 136, Format::kQ8_K}, {Format::kMXFP4, 32, 17, Format::kQ8_0},
  };
  for (const Expect& e : cases) {
    const FormatInfo& info = format_info(e.f);
    EXPECT_EQ(info.format, e.f);
    EXPECT_EQ(info.block_size, e.block_size) << info.name;
    EXPECT_EQ(info.block_bytes, e.block_bytes) << info.name;
    EXPECT_EQ(info.activation, e.activation) << info.name;
    EXPECT_EQ(find_format(static_cast<uint32_t>(e.f)), &info);
  }
  EXPECT_EQ(row_bytes(Format::kQ4_1, 576), 18 * 20);
  EXPECT_EQ(row_bytes(Format::kQ6_K, 2048), 8 * 210);
  EXPECT_EQ(row_bytes(Format::kF16, 7), 14);
  EXPECT_EQ(row_bytes(Format::kMXFP4, 2880), 90 * 17);  // gpt-oss's hidden width, odd bytes
}

TEST(Format, WeightFormatForValidatesTypeAndRowLength) {
  ASSERT_TRUE(weight_format_for(3, 576).ok());
  EXPECT_EQ(*weight_format_for(3, 576), Format::kQ4_1);
  EXPECT_EQ(*weight_format_for(0, 7), Format::kF32);

  auto bad_k = weight_format_for(12, 640);  // Q4_K needs multiples of 256
  ASSERT_FALSE(bad_k.ok());
  EXPECT_NE(bad_k.error().message.find("multiple of 256"), std::string::npos);

  EXPECT_EQ(*weight_format_for(39, 2880), Format::kMXFP4);
  auto bad_mxfp4 = weight_format_for(39, 2890);
  ASSERT_FALSE(bad_mxfp4.ok());
  EXPECT_NE(bad_mxfp4.error().message.find("mxfp4 weight row needs a positive multiple of 32"),
            std::string::npos);

  auto activation_only = weight_format_for(15, 256);  // Q8_K
  ASSERT_FALSE(activation_only.ok());
  EXPECT_NE(activation_only.error().message.find("activation format"), std::string::npos);

  auto unknown = weight_format_for(16, 256);  // IQ2_XXS
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("not supported"), std::string::npos);
  EXPECT_EQ(find_format(4), nullptr);  // Q4_2, removed from ggml
  EXPECT_FALSE(weight_format_for(0, 0).ok());
}

}  // namespace
}  // namespace drift::kernels
