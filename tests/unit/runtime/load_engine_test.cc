// The composition root: a file that cannot be loaded is an error naming it, not a crash.
#include "runtime/load_engine.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "model/kv_pages.h"

namespace drift {
namespace {

TEST(LoadEngine, ReportsAMissingModelFile) {
  auto engine = load_engine("/nonexistent/model.gguf", EngineConfig{});
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.error().message.find("/nonexistent/model.gguf"), std::string::npos)
      << engine.error().message;
}

TEST(LoadEngine, ReportsAFileThatIsNotGguf) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / "drift_load_engine_not_a_gguf.bin";
  std::ofstream(path) << "this is not a GGUF file";
  auto engine = load_engine(path.string(), EngineConfig{});
  std::filesystem::remove(path);
  ASSERT_FALSE(engine.ok());
  EXPECT_FALSE(engine.error().message.empty());
}

// The KV manager plans with KVLayout::bytes_per_page; the executor allocates
// KvPages::bytes_per_page: the same bytes for every dtype and KV grouping, or a budget would not
// be what it says.
TEST(LoadEngine, KvLayoutAndKvPagesCountThePageAlike) {
  for (KVDtype dtype :
       {KVDtype::kF16, KVDtype::kBF16, KVDtype::kF32, KVDtype::kInt8, KVDtype::kInt4}) {
    for (int32_t head_dim : {64, 256}) {
      for (int32_t page_size : {16, 32, 2}) {
        ModelConfig config;
        config.n_layers = 3;
        config.n_kv_heads = 2;
        config.head_dim = config.head_dim_v = head_dim;
        const KVLayout layout{.num_layers = 3,
                              .num_kv_heads = 2,
                              .head_dim = head_dim,
                              .page_size = page_size,
                              .dtype = dtype};
        ASSERT_TRUE(layout.validate().ok());
        EXPECT_EQ(layout.bytes_per_page(),
                  uint64_t(KvPages::bytes_per_page(config, page_size, kv_format_of(dtype))))
            << kv_dtype_name(dtype) << " head_dim " << head_dim << " page " << page_size;
        // KV groups of one layer each (a full one and two sliding): a page holds one layer.
        KVLayout grouped = layout;
        grouped.num_layers = 1;
        grouped.groups = {{0}, {8}, {8}};
        ASSERT_TRUE(grouped.validate().ok());
        EXPECT_EQ(grouped.bytes_per_page(),
                  uint64_t(KvPages::bytes_per_page(config, page_size, kv_format_of(dtype), 1)))
            << kv_dtype_name(dtype) << " head_dim " << head_dim << " page " << page_size;
      }
    }
  }
}

}  // namespace
}  // namespace drift
