#include "kv/kv_groups.h"

#include <gtest/gtest.h>

#include <vector>

namespace drift {
namespace {

// Gemma 3's pattern: every 6th layer global, the others sliding.
std::vector<int32_t> gemma3_windows(int32_t n_layers, int32_t window = 512) {
  std::vector<int32_t> w;
  for (int32_t il = 0; il < n_layers; ++il) w.push_back(il % 6 < 5 ? window : 0);
  return w;
}

TEST(KVGroups, Gemma3_270MGetsSixGroupsOfThreeLayersGlobalFirst) {
  auto g = group_kv_layers(gemma3_windows(18), true);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->layers_per_group, 3);
  ASSERT_EQ(g->num_groups(), 6);
  EXPECT_FALSE(g->groups[0].sliding());
  for (int32_t k = 1; k < 6; ++k) EXPECT_EQ(g->groups[size_t(k)].sliding_window, 512);
  // Global layers 5, 11, 17 fill group 0; sliding layers 0-4 group 1, 6-10 (from the 6th
  // sliding layer, 6) ... in layer order, three a group.
  EXPECT_EQ(g->layer_group,
            (std::vector<int32_t>{1, 1, 1, 2, 2, 0, 2, 3, 3, 3, 4, 0, 4, 4, 5, 5, 5, 0}));
  EXPECT_EQ(g->layer_slot,
            (std::vector<int32_t>{0, 1, 2, 0, 1, 0, 2, 0, 1, 2, 0, 1, 1, 2, 0, 1, 2, 2}));
}

TEST(KVGroups, AlternatingLayersGetTwoGroups) {
  const std::vector<int32_t> gpt_oss = {16, 0, 16, 0};
  auto g = group_kv_layers(gpt_oss, true);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->layers_per_group, 2);
  EXPECT_EQ(g->groups, (std::vector<KVGroup>{KVGroup{0}, KVGroup{16}}));
  EXPECT_EQ(g->layer_group, (std::vector<int32_t>{1, 0, 1, 0}));
  EXPECT_EQ(g->layer_slot, (std::vector<int32_t>{0, 0, 1, 1}));
}

TEST(KVGroups, AKindNotAMultipleOfTheSizePadsItsLastGroup) {
  // Gemma 3 1B: 26 layers, 4 global, 22 sliding: groups of 4, the 6th sliding group half used.
  auto g = group_kv_layers(gemma3_windows(26), true);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->layers_per_group, 4);
  ASSERT_EQ(g->num_groups(), 7);
  std::vector<int32_t> members(7, 0);
  for (int32_t group : g->layer_group) ++members[size_t(group)];
  EXPECT_EQ(members, (std::vector<int32_t>{4, 4, 4, 4, 4, 4, 2}));
}

TEST(KVGroups, OneGroupOfEveryLayerWithoutTwoKindsOrWhenOff) {
  for (const auto& [windows, hybrid] :
       std::vector<std::pair<std::vector<int32_t>, bool>>{{{0, 0, 0}, true},
                                                          {gemma3_windows(18), false},
                                                          {{512, 512, 512}, true},
                                                          {{512, 1024}, true}}) {
    auto g = group_kv_layers(windows, hybrid);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->num_groups(), 1);
    EXPECT_FALSE(g->groups[0].sliding());
    EXPECT_EQ(g->layers_per_group, int32_t(windows.size()));
    for (size_t il = 0; il < windows.size(); ++il) {
      EXPECT_EQ(g->layer_group[il], 0);
      EXPECT_EQ(g->layer_slot[il], int32_t(il));
    }
    // And the layout is exactly the one-group layout of before.
    KVLayout base{.num_layers = 99, .num_kv_heads = 1, .head_dim = 8};
    KVLayout l = kv_layout_with_groups(base, *g);
    EXPECT_TRUE(l.groups.empty());
    EXPECT_EQ(l.num_layers, int32_t(windows.size()));
  }
}

TEST(KVGroups, BadWindowsAreErrors) {
  EXPECT_FALSE(group_kv_layers({}, true).ok());
  const std::vector<int32_t> negative = {0, -1};
  EXPECT_NE(group_kv_layers(negative, true).error().message.find("layer 1"), std::string::npos);
}

KVLayout gemma3_layout() {
  auto g = group_kv_layers(gemma3_windows(18), true);
  return kv_layout_with_groups(
      KVLayout{.num_kv_heads = 1, .head_dim = 256, .page_size = 16, .dtype = KVDtype::kF16}, *g);
}

TEST(KVGroups, APageHoldsOneGroupsLayers) {
  const KVLayout l = gemma3_layout();
  ASSERT_TRUE(l.validate().ok());
  EXPECT_EQ(l.num_groups(), 6);
  EXPECT_TRUE(l.has_sliding_groups());
  // 2 (K, V) x 3 layers x 1 head x 256 dims x 16 tokens x 2 bytes: a sixth of the old page.
  EXPECT_EQ(l.bytes_per_page(), 2u * 3 * 256 * 16 * 2);
}

TEST(KVGroups, PagesToHoldCapsSlidingGroupsAtWindowPlusAStep) {
  const KVLayout l = gemma3_layout();
  // 4,096 tokens: 256 pages a group. Without freeing, 6 x 256.
  EXPECT_EQ(l.pages_to_hold(4096, std::nullopt), 6 * 256);
  // Steps of 512: a sliding group holds at most the pages of 511 + 512 positions starting
  // anywhere in a page: ceil((1023 + 15) / 16) = 65.
  EXPECT_EQ(l.pages_to_hold(4096, 512), 256 + 5 * 65);
  // Decode-sized steps: ceil((511 + 1 + 15) / 16) = 33.
  EXPECT_EQ(l.pages_to_hold(4096, 1), 256 + 5 * 33);
  // Short sequences hold all their pages in every group.
  EXPECT_EQ(l.pages_to_hold(100, 512), 6 * 7);
  EXPECT_EQ(l.pages_to_hold(0, 512), 0);
  // The one-group layout of a model without sliding layers is unchanged.
  KVLayout flat{.num_layers = 30, .num_kv_heads = 3, .head_dim = 64, .page_size = 16};
  EXPECT_EQ(flat.pages_to_hold(4096, 512), 256);
}

TEST(KVGroups, TokensHeldIsTheLongestSequenceThatFitsAlone) {
  const KVLayout l = gemma3_layout();
  const int64_t pages = 256 + 5 * 65;  // exactly one 4,096-token sequence at steps of 512
  EXPECT_EQ(l.tokens_held(pages, 512), 4096);
  EXPECT_EQ(l.tokens_held(pages - 1, 512), 4080);  // a page fewer in group 0: 255 pages
  EXPECT_EQ(l.tokens_held(6 * 256, std::nullopt), 4096);
  EXPECT_EQ(l.tokens_held(0, 512), 0);
  for (int64_t n : {1, 17, 500, 1000, 5000})
    EXPECT_LE(l.pages_to_hold(l.tokens_held(n, 512), 512), n);
}

TEST(KVGroups, Group0MustBeFullAttention) {
  KVLayout l{.num_layers = 1, .num_kv_heads = 1, .head_dim = 8, .groups = {{16}, {0}}};
  EXPECT_NE(l.validate().message().find("group 0"), std::string::npos);
  l.groups = {{0}, {-3}};
  EXPECT_NE(l.validate().message().find("group 1"), std::string::npos);
}

}  // namespace
}  // namespace drift
