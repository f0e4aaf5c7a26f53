// The composition root: a file that cannot be loaded is an error naming it, not a crash.
#include "runtime/load_engine.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

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

}  // namespace
}  // namespace drift
