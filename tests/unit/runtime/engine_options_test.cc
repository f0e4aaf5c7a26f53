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

}  // namespace
}  // namespace drift
