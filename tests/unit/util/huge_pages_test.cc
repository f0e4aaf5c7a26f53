// HugePageArena: 64-byte aligned buffers that never overlap, chunks of their own for large ones,
// and buffers that stay valid when the arena moves (the model's weights move after binding).
#include "util/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace drift {
namespace {

TEST(HugePageArena, BuffersAreAlignedDisjointAndSurviveAMove) {
  HugePageArena arena(size_t{4} << 20);
  std::vector<std::pair<uint8_t*, size_t>> buffers;
  const size_t sizes[] = {1, 63, 64, 1000, size_t{3} << 20, 70000, size_t{9} << 20, 5};
  for (size_t i = 0; i < std::size(sizes); ++i) {
    uint8_t* p = arena.allocate(sizes[i]);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << "buffer " << i;
    std::memset(p, static_cast<int>(i + 1), sizes[i]);
    buffers.emplace_back(p, sizes[i]);
  }
  HugePageArena moved = std::move(arena);
  for (size_t i = 0; i < buffers.size(); ++i) {
    const auto [p, n] = buffers[i];
    for (size_t k = 0; k < n; k += 4093)
      ASSERT_EQ(p[k], static_cast<uint8_t>(i + 1)) << "buffer " << i << " overwritten at " << k;
    ASSERT_EQ(p[n - 1], static_cast<uint8_t>(i + 1));
  }
  EXPECT_NE(moved.allocate(128), nullptr);
}

TEST(HugePageArena, RefusesSizesThatOverflow) {
  HugePageArena arena;
  EXPECT_EQ(arena.allocate(SIZE_MAX - 10), nullptr);
  EXPECT_EQ(allocate_huge_page_backed(SIZE_MAX - 10), nullptr);
}

}  // namespace
}  // namespace drift
