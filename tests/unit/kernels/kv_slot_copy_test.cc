// Moving a stored key or value between slots: the moved entry reads back exactly as its source
// (codes and scales), and no other slot changes — in every KV format, within a block and across
// blocks.
#include "kernels/kv_slot_copy.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/kv_format.h"

namespace drift::kernels {
namespace {

using testing::bits;

constexpr KvFormat kFormats[] = {KvFormat::kF16, KvFormat::kBF16, KvFormat::kF32, KvFormat::kInt8,
                                 KvFormat::kInt4};

// A key and a value block of `page_size` slots filled with random rows.
struct Blocks {
  std::vector<uint8_t> keys, values;
};

Blocks filled(KvFormat f, int64_t dim, int64_t page_size, std::mt19937& rng) {
  Blocks b{std::vector<uint8_t>(kv_key_block_bytes(f, dim, page_size)),
           std::vector<uint8_t>(kv_value_block_bytes(f, dim, page_size))};
  for (int64_t j = 0; j < page_size; ++j) {
    kv_store_key(f, b.keys.data(), dim, page_size, j, testing::random_floats(dim, rng, 3).data());
    kv_store_value(f, b.values.data(), dim, page_size, j,
                   testing::random_floats(dim, rng, 3).data());
  }
  return b;
}

std::vector<uint32_t> key_slot(KvFormat f, const Blocks& b, int64_t dim, int64_t ps, int64_t j) {
  std::vector<uint32_t> out;
  for (int64_t e = 0; e < dim; ++e)
    out.push_back(bits(kv_load_key(f, b.keys.data(), dim, ps, j, e)));
  return out;
}
std::vector<uint32_t> value_slot(KvFormat f, const Blocks& b, int64_t dim, int64_t ps, int64_t j) {
  std::vector<uint32_t> out;
  for (int64_t e = 0; e < dim; ++e)
    out.push_back(bits(kv_load_value(f, b.values.data(), dim, ps, j, e)));
  return out;
}

TEST(KvSlotCopy, MovedEntryReadsBackExactlyAndNothingElseChanges) {
  std::mt19937 rng(5);
  for (KvFormat f : kFormats) {
    for (int64_t dim : {int64_t{64}, int64_t{96}}) {
      const int64_t ps = 16;
      const Blocks src = filled(f, dim, ps, rng);
      // Across blocks: every (from, to) pair of odd and even slots (int4 packs two slots a byte).
      for (int64_t from : {0, 3, 8, 15}) {
        for (int64_t to : {0, 1, 6, 15}) {
          Blocks dst = filled(f, dim, ps, rng);
          const Blocks before = dst;
          kv_copy_key_slot(f, src.keys.data(), from, dst.keys.data(), to, dim, ps);
          kv_copy_value_slot(f, src.values.data(), from, dst.values.data(), to, dim, ps);
          for (int64_t j = 0; j < ps; ++j) {
            const bool moved = j == to;
            EXPECT_EQ(key_slot(f, dst, dim, ps, j),
                      moved ? key_slot(f, src, dim, ps, from) : key_slot(f, before, dim, ps, j))
                << kv_format_bits(f) << "-bit dim " << dim << " " << from << "->" << to << " slot "
                << j;
            EXPECT_EQ(value_slot(f, dst, dim, ps, j),
                      moved ? value_slot(f, src, dim, ps, from) : value_slot(f, before, dim, ps, j))
                << kv_format_bits(f) << "-bit dim " << dim << " " << from << "->" << to << " slot "
                << j;
          }
        }
      }
      // Within one block (compaction moves entries down the same page).
      Blocks same = src;
      kv_copy_key_slot(f, same.keys.data(), 9, same.keys.data(), 2, dim, ps);
      kv_copy_value_slot(f, same.values.data(), 9, same.values.data(), 2, dim, ps);
      EXPECT_EQ(key_slot(f, same, dim, ps, 2), key_slot(f, src, dim, ps, 9));
      EXPECT_EQ(value_slot(f, same, dim, ps, 2), value_slot(f, src, dim, ps, 9));
      EXPECT_EQ(key_slot(f, same, dim, ps, 3), key_slot(f, src, dim, ps, 3));
    }
  }
}

}  // namespace
}  // namespace drift::kernels
