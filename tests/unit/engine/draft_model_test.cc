// The engine's draft model (engine/draft_model.h) over fake executors: its KV pool sized from the
// configuration (or refused, naming the field), a vocabulary size other than the model's refused,
// and a whole engine under --spec draft whose draft model is the fake model itself: every draft
// accepted, the output that of --spec none, the draft model's counts and time in the metrics.
#include "engine/draft_model.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/engine.h"
#include "engine_fakes.h"

namespace drift {
namespace {

using testing::FakeExecutor;
using testing::FakeModel;

EngineConfig draft_config() {
  EngineConfig c = testing::small_config();
  c.scheduler.spec.mode = SpecMode::kDraft;
  return c;
}

EngineSetup setup_of(const EngineConfig& c) {
  auto setup = resolve_engine_setup(c, testing::fake_model_facts(), 0);
  EXPECT_TRUE(setup.ok()) << setup.error().message;
  return *setup;
}

// A draft source whose executor is the engine's fake over the draft's pages and pass sizes; the
// setup it was built for is kept in `seen`.
struct FakeDraft {
  std::optional<DraftExecutorSetup> seen;
  EngineSetup engine_setup;
  Expected<std::unique_ptr<Executor>> make(const DraftExecutorSetup& s) {
    seen = s;
    EngineSetup fake = engine_setup;  // what the fake checks plans against
    fake.num_kv_pages = s.num_kv_pages;
    fake.scheduler.max_num_batched_tokens = s.drafter.max_pass_tokens();
    return std::unique_ptr<Executor>(
        std::make_unique<FakeExecutor>(fake, FakeModel{}, testing::FakeHooks{}));
  }
};

TEST(DraftModel, ItsKvPoolHoldsTheContextAndAPagePerSequenceByDefault) {
  const EngineConfig c = draft_config();
  const EngineSetup setup = setup_of(c);
  FakeDraft fake{.engine_setup = setup};
  auto factory = [&](const DraftExecutorSetup& s) { return fake.make(s); };
  ModelFacts facts = testing::fake_model_facts();
  facts.num_layers = 1;  // another geometry than the model's
  auto draft =
      DraftModel::create(DraftModelSource{facts, factory, nullptr}, c, setup, testing::kVocab);
  ASSERT_TRUE(draft.ok()) << draft.error().message;
  ASSERT_TRUE(fake.seen);
  EXPECT_EQ(fake.seen->kv_layout.num_layers, 1);
  EXPECT_EQ(fake.seen->kv_layout.page_size, setup.kv_layout.page_size);
  EXPECT_EQ(fake.seen->num_kv_pages,
            setup.kv_layout.pages_for_tokens(setup.max_model_len) + c.scheduler.max_num_seqs);
  EXPECT_EQ(fake.seen->drafter.max_sequences, c.scheduler.max_num_seqs);
  EXPECT_EQ(fake.seen->drafter.max_context, setup.max_model_len);
  EXPECT_EQ((*draft)->kv().num_pages(), fake.seen->num_kv_pages);
  EXPECT_EQ((*draft)->kv_bytes(),
            uint64_t(fake.seen->num_kv_pages) * fake.seen->kv_layout.bytes_per_page());
}

TEST(DraftModel, ATooSmallKvBudgetOrAnotherVocabularySizeIsRefused) {
  EngineConfig c = draft_config();
  const EngineSetup setup = setup_of(c);
  FakeDraft fake{.engine_setup = setup};
  auto factory = [&](const DraftExecutorSetup& s) { return fake.make(s); };
  c.spec_draft.kv_mib = 0;
  auto other_vocab =
      DraftModel::create(DraftModelSource{testing::fake_model_facts(), factory, nullptr}, c, setup,
                         testing::kVocab + 1);
  ASSERT_FALSE(other_vocab.ok());
  EXPECT_NE(other_vocab.error().message.find("spec_draft.model_path"), std::string::npos);
  // 1 MiB holds 2048 of the fake's 512-byte pages; a draft of 2^20 layers' pages holds none.
  ModelFacts huge = testing::fake_model_facts();
  huge.num_kv_heads = 1 << 12;
  huge.head_dim = 1 << 8;
  c.spec_draft.kv_mib = 1;
  auto too_small =
      DraftModel::create(DraftModelSource{huge, factory, nullptr}, c, setup, testing::kVocab);
  ASSERT_FALSE(too_small.ok());
  EXPECT_NE(too_small.error().message.find("spec_draft.kv_mib"), std::string::npos)
      << too_small.error().message;
}

std::vector<std::vector<TokenId>> run_engine(const EngineConfig& c, bool with_draft,
                                             EngineMetrics& metrics) {
  FakeDraft fake{.engine_setup = setup_of(c)};
  auto factory = [&](const DraftExecutorSetup& s) { return fake.make(s); };
  const DraftModelSource source{testing::fake_model_facts(), factory, nullptr};
  auto make_target = [&](const EngineSetup& setup) -> Expected<std::unique_ptr<Executor>> {
    return std::unique_ptr<Executor>(
        std::make_unique<FakeExecutor>(setup, FakeModel{}, testing::FakeHooks{}));
  };
  auto engine =
      Engine::create(c, testing::fake_model_facts(), std::make_shared<testing::FakeCodec>(),
                     make_target, {}, {}, with_draft ? &source : nullptr);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  std::vector<std::vector<TokenId>> out;
  if (!engine.ok()) return out;
  std::vector<RequestHandle> handles;
  for (RequestId id = 1; id <= 3; ++id) {
    Request r = testing::token_request(id, 10 + int32_t(id), 40);
    r.sampling.temperature = 0;
    r.sampling.ignore_eos = true;
    handles.push_back((*engine)->submit(std::move(r)));
  }
  for (RequestHandle& h : handles) out.push_back(testing::finish_within(h).tokens);
  metrics = (*engine)->metrics();
  return out;
}

TEST(DraftModel, AnEngineWithADraftModelGivesTheOutputOfSpecNone) {
  EngineConfig none = testing::small_config();
  EngineMetrics plain_metrics, draft_metrics;
  const auto plain = run_engine(none, false, plain_metrics);
  const auto drafted = run_engine(draft_config(), true, draft_metrics);
  EXPECT_EQ(drafted, plain);
  EXPECT_GT(draft_metrics.spec_draft_model_draft_tokens, 20u);
  EXPECT_EQ(draft_metrics.spec_draft_model_accepted_tokens,
            draft_metrics.spec_draft_model_draft_tokens);
  EXPECT_GT(draft_metrics.spec_draft_model_steps, 0u);
  EXPECT_GT(draft_metrics.spec_draft_model_passes, draft_metrics.spec_draft_model_steps);
  EXPECT_GT(draft_metrics.spec_draft_model_kv_bytes, 0u);
  EXPECT_LT(draft_metrics.steps, plain_metrics.steps) << "accepted drafts saved steps";
}

}  // namespace
}  // namespace drift
