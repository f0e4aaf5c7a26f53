// The engine options' conversion to an EngineConfig, for the options a command's flags and the
// Python keyword arguments share: speculative decoding's modes.
#include "runtime/engine_options.h"

#include <gtest/gtest.h>

#include <utility>

namespace drift {
namespace {

TEST(EngineOptions, SpecAutoAndNgramDraftFromTheRequestNoneTurnsItOff) {
  EngineOptions o;
  EXPECT_EQ(o.spec, "auto") << "on by default";
  for (auto [name, mode] : {std::pair{"auto", SpecMode::kAuto}, {"ngram", SpecMode::kNgram}}) {
    o.spec = name;
    Expected<EngineConfig> c = to_engine_config(o);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->scheduler.spec.mode, mode) << name;
    EXPECT_TRUE(c->scheduler.spec.enabled());
  }
  o.spec = "none";
  Expected<EngineConfig> off = to_engine_config(o);
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->scheduler.spec.enabled());
  EXPECT_EQ(off->scheduler.spec.max_plan_draft_tokens(), 0);
  o.spec = "draft";
  Expected<EngineConfig> bad = to_engine_config(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("spec"), std::string::npos) << bad.error().message;
}

TEST(EngineOptions, SpecDraftNeedsADraftModelAndSizesItsKv) {
  EngineOptions o;
  o.spec = "draft";
  Expected<EngineConfig> missing = to_engine_config(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("spec_draft_model"), std::string::npos)
      << missing.error().message;
  o.spec_draft_model = "/models/small.gguf";
  Expected<EngineConfig> c = to_engine_config(o);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->scheduler.spec.mode, SpecMode::kDraft);
  EXPECT_EQ(c->spec_draft.model_path, "/models/small.gguf");
  EXPECT_EQ(c->spec_draft.kv_mib, 0) << "derived from the context by default";
  o.spec_draft_kv_mib = 64;
  EXPECT_EQ(to_engine_config(o)->spec_draft.kv_mib, 64);
  o.spec_draft_kv_mib = 0;
  Expected<EngineConfig> zero = to_engine_config(o);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().message.find("spec_draft_kv_mib"), std::string::npos);
  // auto uses a draft model when one is given.
  o.spec = "auto";
  o.spec_draft_kv_mib.reset();
  Expected<EngineConfig> automatic = to_engine_config(o);
  ASSERT_TRUE(automatic.ok());
  EXPECT_EQ(automatic->spec_draft.model_path, "/models/small.gguf");
}

}  // namespace
}  // namespace drift
