#include "kv/kv_layout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kv/kv_capacity.h"

namespace drift {
namespace {

KVLayout small_layout(KVDtype dtype = KVDtype::kF16) {
  return KVLayout{
      .num_layers = 2, .num_kv_heads = 4, .head_dim = 8, .page_size = 16, .dtype = dtype};
}

TEST(KVLayout, BytesPerPageCountsKAndVOfEveryLayerAndHead) {
  // 2 (K,V) * 2 layers * 4 heads * 8 dims * 2 bytes = 256 bytes per token; 16 tokens per page.
  EXPECT_EQ(small_layout().bytes_per_page(), 4096u);
  EXPECT_EQ(small_layout(KVDtype::kBF16).bytes_per_page(), 4096u);
  EXPECT_EQ(small_layout(KVDtype::kF32).bytes_per_page(), 8192u);
}

TEST(KVLayout, QuantizedPagesCountCodesAndScales) {
  // int8: per block 64 dims x 16 slots = 1024 code bytes + 2 groups x 16 fp16 scales = 1088.
  KVLayout l{.num_layers = 2, .num_kv_heads = 4, .head_dim = 64, .page_size = 16};
  EXPECT_EQ(l.bytes_per_page(), 16u * 64 * 16 * 2);
  l.dtype = KVDtype::kInt8;
  EXPECT_EQ(l.bytes_per_page(), 16u * 1088);
  l.head_dim = 72;  // not whole groups: one scale per row
  EXPECT_EQ(l.bytes_per_page(), 16u * (72 * 16 + 32));
  l.head_dim = 64;
  // int4: keys 512 code bytes + 16 fp16 masters + 4 groups x 16 int8 sub-scales = 608, values
  // 512 + 16 fp16 scales (one per 64 elements) = 544.
  l.dtype = KVDtype::kInt4;
  EXPECT_EQ(l.bytes_per_page(), 8u * (608 + 544));
  l.head_dim = 256;  // keys 2048 + 32 + 16 x 16, values 2048 + 4 x 16 x 2
  EXPECT_EQ(l.bytes_per_page(), 8u * (2336 + 2176));
  l.head_dim = 96;  // values: a scale per 32 elements
  EXPECT_EQ(l.bytes_per_page(), 8u * ((768 + 32 + 96) + (768 + 3 * 16 * 2)));
  l.head_dim = 64;
  // So a fixed budget holds 1.88x (int8) and 3.56x (int4) the pages of f16.
  const auto f16_pages =
      kv_pages_for_budget(KVLayout{.num_layers = 2, .num_kv_heads = 4, .head_dim = 64},
                          KVMemoryBudget::of_bytes(64u << 20), 0);
  const auto int8_pages = kv_pages_for_budget(
      KVLayout{.num_layers = 2, .num_kv_heads = 4, .head_dim = 64, .dtype = KVDtype::kInt8},
      KVMemoryBudget::of_bytes(64u << 20), 0);
  const auto int4_pages = kv_pages_for_budget(
      KVLayout{.num_layers = 2, .num_kv_heads = 4, .head_dim = 64, .dtype = KVDtype::kInt4},
      KVMemoryBudget::of_bytes(64u << 20), 0);
  ASSERT_TRUE(f16_pages.ok() && int8_pages.ok() && int4_pages.ok());
  EXPECT_EQ(*f16_pages, (64 << 20) / (16 * 2048));
  EXPECT_EQ(*int8_pages, (64 << 20) / (16 * 1088));
  EXPECT_EQ(*int4_pages, (64 << 20) / (8 * 1152));
}

TEST(KVLayout, Int4NeedsWholeGroups) {
  KVLayout l{.num_layers = 1, .num_kv_heads = 1, .head_dim = 48, .dtype = KVDtype::kInt4};
  EXPECT_NE(l.validate().message().find("int4"), std::string::npos);
  l.head_dim = 64;
  EXPECT_TRUE(l.validate().ok());
}

TEST(KVLayout, PagesForTokensRoundsUp) {
  KVLayout l = small_layout();
  EXPECT_EQ(l.pages_for_tokens(0), 0);
  EXPECT_EQ(l.pages_for_tokens(1), 1);
  EXPECT_EQ(l.pages_for_tokens(16), 1);
  EXPECT_EQ(l.pages_for_tokens(17), 2);
}

TEST(KVLayout, DtypeNamesRoundTrip) {
  for (KVDtype d : {KVDtype::kF16, KVDtype::kF32, KVDtype::kBF16, KVDtype::kInt8, KVDtype::kInt4})
    EXPECT_EQ(parse_kv_dtype(kv_dtype_name(d)), d);
  EXPECT_EQ(parse_kv_dtype("q8"), std::nullopt);
}

TEST(KVLayout, ValidateNamesTheField) {
  EXPECT_TRUE(small_layout().validate().ok());
  KVLayout l = small_layout();
  l.num_layers = 0;
  EXPECT_NE(l.validate().message().find("num_layers"), std::string::npos);
  l = small_layout();
  l.num_kv_heads = -1;
  EXPECT_NE(l.validate().message().find("num_kv_heads"), std::string::npos);
  l = small_layout();
  l.head_dim = 0;
  EXPECT_NE(l.validate().message().find("head_dim"), std::string::npos);
  l = small_layout();
  l.page_size = 0;
  EXPECT_NE(l.validate().message().find("page_size"), std::string::npos);
  l = small_layout();
  l.num_layers = l.num_kv_heads = l.head_dim = l.page_size = std::numeric_limits<int32_t>::max();
  EXPECT_NE(l.validate().message().find("too large"), std::string::npos);
}

TEST(KVCapacity, ExplicitBytesGiveWholePages) {
  auto pages = kv_pages_for_budget(small_layout(), KVMemoryBudget::of_bytes(4096 * 10 + 4095), 0);
  ASSERT_TRUE(pages.ok()) << pages.error().message;
  EXPECT_EQ(*pages, 10);
}

TEST(KVCapacity, RamFractionAppliesToPhysicalRam) {
  uint64_t ram = 4096ull * 1000;
  auto pages = kv_pages_for_budget(small_layout(), KVMemoryBudget::of_ram_fraction(0.25), ram);
  ASSERT_TRUE(pages.ok()) << pages.error().message;
  EXPECT_EQ(*pages, 250);
  EXPECT_TRUE(physical_ram_bytes().has_value());
  EXPECT_GT(*physical_ram_bytes(), 0u);
}

TEST(KVCapacity, InvalidBudgetsNameTheProblem) {
  KVLayout l = small_layout();
  auto message = [&](KVMemoryBudget b) {
    auto r = kv_pages_for_budget(l, b, 1ull << 30);
    return r.ok() ? std::string("ok") : r.error().message;
  };
  EXPECT_NE(message(KVMemoryBudget{}).find("exactly one"), std::string::npos);
  EXPECT_NE(message(KVMemoryBudget{4096, 0.5}).find("exactly one"), std::string::npos);
  EXPECT_NE(message(KVMemoryBudget::of_ram_fraction(0)).find("ram_fraction"), std::string::npos);
  EXPECT_NE(message(KVMemoryBudget::of_ram_fraction(1.5)).find("ram_fraction"), std::string::npos);
  EXPECT_NE(message(KVMemoryBudget::of_ram_fraction(std::nan(""))).find("ram_fraction"),
            std::string::npos);
  std::string small = message(KVMemoryBudget::of_bytes(4095));
  EXPECT_NE(small.find("4095 bytes hold no page"), std::string::npos) << small;
  EXPECT_NE(small.find("4096 bytes"), std::string::npos) << small;
  KVLayout tiny{.num_layers = 1, .num_kv_heads = 1, .head_dim = 1, .page_size = 1};
  auto r = kv_pages_for_budget(tiny, KVMemoryBudget::of_bytes(1ull << 40), 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("page ids"), std::string::npos);
  l.head_dim = 0;
  EXPECT_NE(message(KVMemoryBudget::of_bytes(1 << 20)).find("head_dim"), std::string::npos);
}

}  // namespace
}  // namespace drift
