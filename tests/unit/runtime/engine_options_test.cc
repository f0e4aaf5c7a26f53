// The engine options' conversion to an EngineConfig, for the options a command's flags and the
// Python keyword arguments share: their defaults (EngineConfig's, but for the programs' three
// named decisions) and speculative decoding's modes.
#include "runtime/engine_options.h"

#include <gtest/gtest.h>

#include <utility>

namespace drift {
namespace {

// Every option left unset gives what EngineConfig says: a literal written into EngineOptions (or a
// flag's default) that disagrees with the engine fails here.
TEST(EngineOptions, NoOptionsGiveTheProgramsEngineConfig) {
  Expected<EngineConfig> got = to_engine_config(EngineOptions{});
  ASSERT_TRUE(got.ok()) << got.error().message;
  const EngineConfig& want = program_engine_defaults();
  EXPECT_EQ(got->threads, want.threads);
  EXPECT_EQ(got->scheduler.max_num_seqs, want.scheduler.max_num_seqs);
  EXPECT_EQ(got->scheduler.max_num_batched_tokens, want.scheduler.max_num_batched_tokens);
  EXPECT_EQ(got->scheduler.enable_chunked_prefill, want.scheduler.enable_chunked_prefill);
  EXPECT_EQ(got->scheduler.admission, want.scheduler.admission);
  EXPECT_EQ(got->scheduler.policy, want.scheduler.policy);
  EXPECT_EQ(got->scheduler.kv_compress.keep, want.scheduler.kv_compress.keep);
  EXPECT_EQ(got->scheduler.kv_compress.policy, want.scheduler.kv_compress.policy);
  EXPECT_EQ(got->scheduler.spec.mode, want.scheduler.spec.mode);
  EXPECT_EQ(got->scheduler.spec.pool_entries, want.scheduler.spec.pool_entries);
  EXPECT_EQ(got->kv.page_size, want.kv.page_size);
  EXPECT_EQ(got->kv.dtype, want.kv.dtype);
  EXPECT_EQ(got->kv.budget.bytes, want.kv.budget.bytes);
  EXPECT_EQ(got->kv.budget.ram_fraction, want.kv.budget.ram_fraction);
  EXPECT_EQ(got->kv.enable_prefix_caching, want.kv.enable_prefix_caching);
  EXPECT_EQ(got->kv.hybrid, want.kv.hybrid);
  EXPECT_EQ(got->kv.disk_dir, want.kv.disk_dir);
  EXPECT_EQ(got->kv.disk_gib, want.kv.disk_gib);
  EXPECT_EQ(got->max_model_len, want.max_model_len);
  EXPECT_EQ(got->max_model_len_limit, want.max_model_len_limit);
  EXPECT_EQ(got->default_max_tokens, want.default_max_tokens);
  EXPECT_EQ(got->max_queued_requests, want.max_queued_requests);
  EXPECT_EQ(got->latency.target_itl_seconds, want.latency.target_itl_seconds);
  EXPECT_EQ(got->latency.idle_step_seconds, want.latency.idle_step_seconds);
  EXPECT_EQ(got->latency.target_ttft_seconds, want.latency.target_ttft_seconds);
  EXPECT_EQ(got->latency.max_ttft_seconds, want.latency.max_ttft_seconds);
  EXPECT_EQ(got->sessions.max_sessions, want.sessions.max_sessions);
  EXPECT_EQ(got->sessions.max_total_tokens, want.sessions.max_total_tokens);
  EXPECT_EQ(got->sessions.idle_ttl_seconds, want.sessions.idle_ttl_seconds);
}

// The programs' defaults are EngineConfig's but for the decisions engine_options.h names: threads,
// sequences at once and speculative decoding. A new difference must be added there, and here.
TEST(EngineOptions, TheProgramsDifferFromTheLibraryOnlyInTheirNamedDecisions) {
  const EngineConfig& programs = program_engine_defaults();
  const EngineConfig library;
  EXPECT_EQ(programs.threads, 2);
  EXPECT_EQ(library.threads, 1);
  EXPECT_EQ(programs.scheduler.max_num_seqs, 16);
  EXPECT_EQ(library.scheduler.max_num_seqs, 64);
  EXPECT_EQ(programs.scheduler.spec.mode, SpecMode::kAuto);
  EXPECT_EQ(library.scheduler.spec.mode, SpecMode::kNone);
  EXPECT_EQ(EngineOptions{}.spec_pool_mib, 8.0);
  EXPECT_EQ(library.scheduler.spec.pool_entries, 0);
  // Everything else is the library's.
  EXPECT_EQ(programs.scheduler.max_num_batched_tokens, library.scheduler.max_num_batched_tokens);
  EXPECT_EQ(programs.scheduler.spec.max_draft_tokens, library.scheduler.spec.max_draft_tokens);
  EXPECT_EQ(programs.kv.page_size, library.kv.page_size);
  EXPECT_EQ(programs.kv.dtype, library.kv.dtype);
  EXPECT_EQ(programs.kv.budget.ram_fraction, library.kv.budget.ram_fraction);
  EXPECT_EQ(programs.kv.disk_gib, library.kv.disk_gib);
  EXPECT_EQ(programs.max_queued_requests, library.max_queued_requests);
  EXPECT_EQ(programs.latency.target_itl_seconds, library.latency.target_itl_seconds);
  EXPECT_EQ(programs.sampling_defaults, library.sampling_defaults);
}

// --spec-max-draft bounds the draft per sequence; outside [1, 64] it names itself.
TEST(EngineOptions, SpecMaxDraftBoundsTheDraftLength) {
  EngineOptions o;
  o.spec_max_draft = 3;
  auto c = to_engine_config(o);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->scheduler.spec.max_draft_tokens, 3);
  for (int32_t bad : {0, int32_t(kMaxSpecDraftTokens) + 1}) {
    o.spec_max_draft = bad;
    auto refused = to_engine_config(o);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message.find("spec_max_draft"), std::string::npos);
  }
}

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
