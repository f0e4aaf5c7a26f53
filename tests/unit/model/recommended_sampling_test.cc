// model/recommended_sampling.h: a model's general.sampling.* keys, read as llama.cpp reads them.
#include "model/recommended_sampling.h"

#include <gtest/gtest.h>

#include "gguf_builder.h"

namespace drift {
namespace {

using test::GgufBuilder;
using test::parse_gguf;

TEST(RecommendedSampling, ReadsLlamaCppsKeys) {
  auto file = parse_gguf(GgufBuilder()
                             .add_int32("general.sampling.top_k", 20)
                             .add_float32("general.sampling.top_p", 0.8f)
                             .add_float32("general.sampling.min_p", 0.0f)
                             .add_float32("general.sampling.temp", 0.7f)
                             .add_int32("general.sampling.penalty_last_n", 32)
                             .add_float32("general.sampling.penalty_repeat", 1.1f)
                             .add_string("general.sampling.sequence", "temperature;top_k;top_p"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  RecommendedSampling r = read_recommended_sampling(file->file);
  EXPECT_TRUE(r.ignored.empty()) << r.ignored.front();
  EXPECT_EQ(r.settings.top_k, 20);
  EXPECT_FLOAT_EQ(r.settings.top_p.value_or(-1), 0.8f);
  EXPECT_FLOAT_EQ(r.settings.min_p.value_or(-1), 0.0f);
  EXPECT_FLOAT_EQ(r.settings.temperature.value_or(-1), 0.7f);
  EXPECT_EQ(r.settings.penalty_last_n, 32);
  EXPECT_FLOAT_EQ(r.settings.repetition_penalty.value_or(-1), 1.1f);
  // The named stages in order, min_p (not named) after them.
  ASSERT_TRUE(r.settings.order);
  EXPECT_EQ(sampler_order_string(*r.settings.order), "temperature;top_k;top_p;min_p");
}

TEST(RecommendedSampling, AcceptsLlamaCppsAliasesAndSaysWhatItCannotUse) {
  auto file = parse_gguf(
      GgufBuilder()
          .add_uint32("general.sampling.top_k", 0)
          .add_float32("general.sampling.top_p", 1.5f)
          .add_string("general.sampling.temp", "0.6")
          .add_float32("general.sampling.xtc_probability", 0.5f)
          .add_string("general.sampling.sequence", "penalties;dry;top-k;nucleus;minp;temp"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  RecommendedSampling r = read_recommended_sampling(file->file);
  EXPECT_EQ(r.settings.top_k, 0);  // llama.cpp: <= 0 is no limit
  EXPECT_FALSE(r.settings.top_p);  // out of range: ignored, not clamped
  EXPECT_FLOAT_EQ(r.settings.temperature.value_or(-1), 0.6f);
  ASSERT_TRUE(r.settings.order);
  EXPECT_EQ(*r.settings.order, SamplerOrder{});
  ASSERT_EQ(r.ignored.size(), 3u);
  EXPECT_NE(r.ignored[0].find("general.sampling.top_p: 1.5 is outside (0, 1]"), std::string::npos)
      << r.ignored[0];
  EXPECT_NE(r.ignored[1].find("sampler \"dry\""), std::string::npos) << r.ignored[1];
  EXPECT_NE(r.ignored[2].find("xtc_probability"), std::string::npos) << r.ignored[2];
}

TEST(RecommendedSampling, NoKeysNoRecommendation) {
  auto file = parse_gguf(GgufBuilder().add_string("general.architecture", "llama"));
  ASSERT_TRUE(file.ok());
  RecommendedSampling r = read_recommended_sampling(file->file);
  EXPECT_TRUE(r.ignored.empty());
  EXPECT_FALSE(r.settings.temperature || r.settings.top_k || r.settings.top_p || r.settings.min_p ||
               r.settings.order);
}

}  // namespace
}  // namespace drift
