// Small cases that pin exact state: the items of each step, page ids handed out and freed,
// chunk boundaries, preemption and cancellation.
#include "scheduler/engine_scheduler.h"

#include <gtest/gtest.h>

#include "fake_executor.h"
#include "plan_views.h"

namespace drift {
namespace {

using testing::Driver;
using testing::FakeModel;
using testing::make_request;
using Pages = std::vector<PageId>;
using testing::concat;
using testing::D;
using testing::items_of;
using testing::ItemView;
using testing::P;
using testing::pages_of;
using testing::range;
using testing::slot_mapping;

SchedulerConfig small_config() {
  SchedulerConfig c;
  c.max_num_batched_tokens = 8;
  c.max_num_seqs = 4;
  c.max_model_len = 64;
  return c;
}

FakeModel no_eos() { return FakeModel{}; }

TEST(EngineScheduler, CreateRejectsAnInvalidConfig) {
  auto kv = KVCacheManager::create(KVLayout{1, 1, 4, 4}, 8);
  ProgressLog log;
  SchedulerConfig c;
  c.max_num_seqs = 0;
  auto s = EngineScheduler::create(c, {}, *kv, log);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("max_num_seqs"), std::string::npos);
  EXPECT_FALSE(EngineScheduler::create(SchedulerConfig{}, {-3}, *kv, log).ok());
}

TEST(EngineScheduler, LongPromptIsChunkedAcrossStepsWithExactSlotsAndPages) {
  Driver d(small_config(), 16, 4, no_eos(), {});
  d.submit(make_request(1, 21, 3));
  EXPECT_EQ(d.scheduler().find(1)->phase, SequencePhase::kWaiting);

  StepPlan s0 = d.step();
  EXPECT_EQ(items_of(s0), (std::vector<ItemView>{{1, P, 0, 8, false}}));
  EXPECT_EQ(pages_of(s0, 0), (Pages{0, 1}));
  EXPECT_EQ(slot_mapping(s0), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(d.kv().reserved_pages(1), 4) << "guaranteed: 24 tokens = 6 pages, 2 bound";
  EXPECT_EQ(d.scheduler().find(1)->phase, SequencePhase::kPrefill);
  EXPECT_EQ(d.scheduler().find(1)->num_computed_tokens, 8);

  StepPlan s1 = d.step();
  EXPECT_EQ(items_of(s1), (std::vector<ItemView>{{1, P, 8, 8, false}}));
  EXPECT_EQ(pages_of(s1, 0), (Pages{0, 1, 2, 3}));
  EXPECT_EQ(slot_mapping(s1).front(), 8);
  EXPECT_EQ(slot_mapping(s1).back(), 15);

  StepPlan s2 = d.step();
  EXPECT_EQ(items_of(s2), (std::vector<ItemView>{{1, P, 16, 5, true}}));
  EXPECT_EQ(pages_of(s2, 0), range(0, 6));
  EXPECT_EQ(slot_mapping(s2), (std::vector<int64_t>{16, 17, 18, 19, 20}));
  EXPECT_EQ(d.scheduler().find(1)->phase, SequencePhase::kDecode);
  EXPECT_EQ(d.records()[1].generated.size(), 1u);

  StepPlan s3 = d.step();
  EXPECT_EQ(items_of(s3), (std::vector<ItemView>{{1, D, 21, 1, true}}));
  EXPECT_EQ(slot_mapping(s3), (std::vector<int64_t>{21}));
  EXPECT_EQ(s3.token_ids, (std::vector<TokenId>{d.records()[1].generated[0]}));

  StepPlan s4 = d.step();
  EXPECT_EQ(items_of(s4), (std::vector<ItemView>{{1, D, 22, 1, true}}));
  EXPECT_EQ(d.records()[1].finish, FinishReason::kLength);
  EXPECT_EQ(d.records()[1].generated, d.reference(1));
  EXPECT_EQ(d.scheduler().find(1), nullptr);
  // Released exactly once, last page first, behind the never-used pages.
  EXPECT_EQ(d.kv().free_pages_in_order(), concat(range(6, 16), {5, 4, 3, 2, 1, 0}));
  d.expect_all_released();
  EXPECT_TRUE(d.step().empty());
}

TEST(EngineScheduler, LongPrefillThresholdCapsEachChunk) {
  SchedulerConfig c = small_config();
  c.long_prefill_token_threshold = 5;
  Driver d(c, 16, 4, no_eos(), {});
  d.submit(make_request(1, 21, 1));
  std::vector<ItemView> chunks;
  for (int i = 0; i < 5; ++i) chunks.push_back(items_of(d.step()).at(0));
  EXPECT_EQ(chunks, (std::vector<ItemView>{{1, P, 0, 5, false},
                                           {1, P, 5, 5, false},
                                           {1, P, 10, 5, false},
                                           {1, P, 15, 5, false},
                                           {1, P, 20, 1, true}}));
  EXPECT_EQ(d.records()[1].finish, FinishReason::kLength);
  d.expect_all_released();
}

TEST(EngineScheduler, DecodesGoFirstThenPrefillChunksFillTheBudget) {
  Driver d(small_config(), 32, 4, no_eos(), {});
  d.submit(make_request(1, 4, 10));
  d.submit(make_request(2, 20, 2));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, P, 0, 4, true}, {2, P, 0, 4, false}}));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, D, 4, 1, true}, {2, P, 4, 7, false}}));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, D, 5, 1, true}, {2, P, 11, 7, false}}));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, D, 6, 1, true}, {2, P, 18, 2, true}}));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, D, 7, 1, true}, {2, D, 20, 1, true}}));
  EXPECT_EQ(d.records()[2].finish, FinishReason::kLength);
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[1].generated, d.reference(1));
  EXPECT_EQ(d.records()[2].generated, d.reference(2));
  d.expect_all_released();
}

TEST(EngineScheduler, WithoutDecodePreferencePrefillChunksGoFirstAndDecodesWait) {
  SchedulerConfig c = small_config();
  c.prefer_decode_over_prefill = false;
  Driver d(c, 32, 4, no_eos(), {});
  d.submit(make_request(1, 4, 10));
  d.submit(make_request(2, 20, 2));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, P, 0, 4, true}, {2, P, 0, 4, false}}));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{2, P, 4, 8, false}}));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{2, P, 12, 8, true}}));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, D, 4, 1, true}, {2, D, 20, 1, true}}));
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[1].generated, d.reference(1));
  d.expect_all_released();
}

TEST(EngineScheduler, PartialPrefillLimitHoldsBackASecondLongPromptButNotAShortOne) {
  SchedulerConfig c = small_config();
  c.max_num_batched_tokens = 16;
  c.long_prefill_token_threshold = 6;
  c.max_num_partial_prefills = 1;
  Driver d(c, 64, 4, no_eos(), {});
  d.submit(make_request(1, 20, 2));  // long
  d.submit(make_request(2, 3, 5));   // short: prefilled whole in one step
  d.submit(make_request(3, 20, 2));  // long: waits for the partial slot
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, P, 0, 6, false}, {2, P, 0, 3, true}}));
  EXPECT_EQ(d.scheduler().find(3)->phase, SequencePhase::kWaiting);
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{2, D, 3, 1, true}, {1, P, 6, 6, false}}));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{2, D, 4, 1, true}, {1, P, 12, 6, false}}));
  // Request 1 finishes its prefill in this step, so request 3 may start.
  EXPECT_EQ(items_of(d.step()),
            (std::vector<ItemView>{{2, D, 5, 1, true}, {1, P, 18, 2, true}, {3, P, 0, 6, false}}));
  ASSERT_TRUE(d.run_to_completion());
  d.expect_all_released();
}

TEST(EngineScheduler, WithoutChunkingAPromptRunsWholeOrWaits) {
  SchedulerConfig c = small_config();
  c.enable_chunked_prefill = false;
  c.max_model_len = 16;
  c.max_num_batched_tokens = 16;
  Driver d(c, 32, 4, no_eos(), {});
  d.submit(make_request(1, 10, 3));
  d.submit(make_request(2, 10, 3));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, P, 0, 10, true}}));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, D, 10, 1, true}, {2, P, 0, 10, true}}));
  ASSERT_TRUE(d.run_to_completion());
  d.expect_all_released();
}

TEST(EngineScheduler, TwoSequencesGetAndReturnExactPageIds) {
  SchedulerConfig c = small_config();
  c.max_num_batched_tokens = 16;
  Driver d(c, 16, 4, no_eos(), {});
  d.submit(make_request(1, 6, 3));
  d.submit(make_request(2, 3, 5));
  StepPlan s0 = d.step();
  EXPECT_EQ(pages_of(s0, 0), (Pages{0, 1}));
  EXPECT_EQ(pages_of(s0, 1), (Pages{2}));
  EXPECT_EQ(s0.block_table, (Pages{0, 1, 2}));
  EXPECT_EQ(slot_mapping(s0), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 8, 9, 10}));
  StepPlan s1 = d.step();
  EXPECT_EQ(s1.block_table, (Pages{0, 1, 2}));
  EXPECT_EQ(slot_mapping(s1), (std::vector<int64_t>{6, 11}));
  StepPlan s2 = d.step();  // request 2 crosses into a new page; request 1 finishes
  EXPECT_EQ(s2.block_table, (Pages{0, 1, 2, 3}));
  EXPECT_EQ(slot_mapping(s2), (std::vector<int64_t>{7, 12}));
  EXPECT_EQ(d.records()[1].finish, FinishReason::kLength);
  EXPECT_EQ(d.kv().free_pages_in_order(), concat(range(4, 16), {1, 0}));
  EXPECT_EQ(d.kv().refcount(2), 1);
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.kv().free_pages_in_order(), concat(range(4, 16), {1, 0, 3, 2}));
  d.expect_all_released();
}

TEST(EngineScheduler, OptimisticModePreemptsTheLatestArrivalAndItsOutputIsUnchanged) {
  SchedulerConfig c = small_config();
  c.max_num_batched_tokens = 16;
  c.admission = AdmissionMode::kOptimistic;
  Driver d(c, 4, 4, no_eos(), {});  // 16 token slots
  d.submit(make_request(1, 6, 6));
  d.submit(make_request(2, 6, 6));
  StepPlan s0 = d.step();
  EXPECT_EQ(pages_of(s0, 0), (Pages{0, 1}));
  EXPECT_EQ(pages_of(s0, 1), (Pages{2, 3}));
  d.step();
  d.step();
  // Request 1 needs a fifth page: request 2 (later arrival) is preempted and keeps its tokens.
  StepPlan s3 = d.step();
  EXPECT_EQ(items_of(s3), (std::vector<ItemView>{{1, D, 8, 1, true}}));
  EXPECT_EQ(pages_of(s3, 0), (Pages{0, 1, 3}));
  const SequenceState* two = d.scheduler().find(2);
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->phase, SequencePhase::kWaiting);
  EXPECT_EQ(two->num_preemptions, 1);
  EXPECT_EQ(two->num_computed_tokens, 0);
  EXPECT_EQ(two->generated_len(), 3);
  EXPECT_EQ(d.scheduler().capacity_stats().preempted, 1u);
  EXPECT_EQ(d.kv().free_pages_in_order(), (Pages{2}));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, D, 9, 1, true}}));
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, D, 10, 1, true}}));
  EXPECT_EQ(d.records()[1].finish, FinishReason::kLength);
  EXPECT_EQ(d.kv().free_pages_in_order(), (Pages{2, 3, 1, 0}));
  // Request 2 is recomputed: prompt + its 3 generated tokens in one prefill that samples.
  StepPlan s6 = d.step();
  EXPECT_EQ(items_of(s6), (std::vector<ItemView>{{2, P, 0, 9, true}}));
  EXPECT_EQ(pages_of(s6, 0), (Pages{2, 3, 1}));
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[2].finish, FinishReason::kLength);
  EXPECT_EQ(d.records()[2].generated, d.reference(2));
  EXPECT_EQ(d.records()[1].generated, d.reference(1));
  d.expect_all_released();
}

TEST(EngineScheduler, OptimisticModePreemptsTheLowestPriorityFirst) {
  SchedulerConfig c = small_config();
  c.max_num_batched_tokens = 16;
  c.admission = AdmissionMode::kOptimistic;
  Driver d(c, 6, 4, no_eos(), {});
  d.submit(make_request(1, 8, 8, /*priority=*/0));
  d.submit(make_request(2, 4, 8, /*priority=*/-1));
  d.submit(make_request(3, 4, 8, /*priority=*/1));
  for (int i = 0; i < 12 && d.scheduler().capacity_stats().preempted == 0; ++i) d.step();
  ASSERT_EQ(d.scheduler().capacity_stats().preempted, 1u);
  EXPECT_EQ(d.scheduler().find(2)->phase, SequencePhase::kWaiting);
  EXPECT_NE(d.scheduler().find(1)->phase, SequencePhase::kWaiting);
  ASSERT_TRUE(d.run_to_completion());
  for (SeqId id : {1, 2, 3}) EXPECT_EQ(d.records()[id].generated, d.reference(id)) << id;
  d.expect_all_released();
}

TEST(EngineScheduler, GuaranteedModeWaitsForCapacityInsteadOfPreempting) {
  SchedulerConfig c = small_config();
  c.max_num_batched_tokens = 16;
  Driver d(c, 4, 4, no_eos(), {});
  d.submit(make_request(1, 6, 6));  // 3 pages reserved
  d.submit(make_request(2, 6, 6));  // needs 3: waits
  EXPECT_EQ(items_of(d.step()), (std::vector<ItemView>{{1, P, 0, 6, true}}));
  EXPECT_EQ(d.kv().num_available_pages(), 1);
  EXPECT_EQ(d.scheduler().find(2)->phase, SequencePhase::kWaiting);
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.scheduler().capacity_stats().preempted, 0u);
  EXPECT_GT(d.scheduler().capacity_stats().blocked, 0u);
  EXPECT_EQ(d.records()[2].generated, d.reference(2));
  d.expect_all_released();
}

// What could never run is refused by the engine's judge (tests/unit/engine: EngineRejection.*,
// Engine.RequestsThatCanNeverRunAreRejectedAtOnceWithTheSizes); the scheduler takes only admitted
// requests, asserts what they promise, and its invariants name a sequence that breaks it.
TEST(EngineScheduler, ASequenceThatBreaksWhatItsAdmissionPromisedFailsTheInvariants) {
  SchedulerConfig c = small_config();
  c.max_model_len = 32;
  struct Broken {
    SequenceRequest request;
    std::string says;
  };
  std::vector<Broken> cases;
  cases.push_back({make_request(1, 10, 10), "a worst case of 5 pages, more than the pool's 4"});
  cases.push_back(
      {make_request(2, 28, 5), "28 prompt + 5 max new tokens, beyond max_model_len 32"});
  cases.push_back({make_request(3, 0, 3), "an empty prompt"});
  cases.push_back({make_request(4, 3, 0), "max_new_tokens 0 for a generation"});
  cases.push_back({make_request(5, 3, 3), "temperature"});
  cases.back().request.sampling.temperature = -1;
  cases.push_back({make_request(6, 3, 3), "negative token id -5"});
  cases.back().request.prompt[1] = -5;
  cases.push_back({make_request(7, 3, 3), "kv_keep 1.5"});
  cases.back().request.kv_keep = 1.5;
  cases.push_back({make_request(8, 3, 0), "max_new_tokens 0 for an embedding"});
  cases.back().request.pooling = PoolingMode::kMean;  // and no room for its vector
  for (Broken& broken : cases) {
    Driver d(c, 4, 4, no_eos(), {});
#ifdef NDEBUG
    d.scheduler().add(testing::admitted(std::move(broken.request)));
    Status s = d.scheduler().check_invariants();
    ASSERT_FALSE(s.ok()) << broken.says;
    EXPECT_NE(s.message().find(broken.says), std::string::npos) << s.message();
#else
    EXPECT_DEATH(d.scheduler().add(testing::admitted(std::move(broken.request))), "check_admitted");
#endif
  }
  // At the limits it holds: the whole context, and a worst case of exactly the pool.
  Driver d(c, 4, 4, no_eos(), {});
  d.submit(make_request(9, 12, 4));
  EXPECT_TRUE(d.scheduler().check_invariants().ok());
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[9].generated, d.reference(9));
  c.max_model_len = 16;
  Driver whole_context(c, 8, 4, no_eos(), {});
  whole_context.submit(make_request(10, 15, 1));
  ASSERT_TRUE(whole_context.run_to_completion());
  whole_context.expect_all_released();
}

TEST(EngineScheduler, EosAndStopTokensFinishWithStopUnlessEosIsIgnored) {
  FakeModel model;
  model.eos_one_in = 4;
  SchedulerConfig c = small_config();
  c.max_num_batched_tokens = 32;
  c.max_num_seqs = 8;
  Driver d(c, 64, 4, model, {model.eos});
  int stopped = 0;
  for (SeqId id = 1; id <= 8; ++id) {
    SequenceRequest r = make_request(id, 5, 20);
    r.sampling.ignore_eos = id == 8;
    d.submit(r);
  }
  // A stop token taken from what request 9 would generate.
  SequenceRequest nine = make_request(9, 5, 20);
  nine.sampling.ignore_eos = true;
  std::vector<TokenId> solo = model.reference(9, nine.prompt, 20, nine.sampling);
  nine.sampling.stop_token_ids = {solo[2]};
  d.submit(nine);
  ASSERT_TRUE(d.run_to_completion());
  for (SeqId id = 1; id <= 9; ++id) {
    const auto& r = d.records()[id];
    EXPECT_EQ(r.generated, d.reference(id)) << id;
    if (r.finish == FinishReason::kStop) {
      ++stopped;
      EXPECT_TRUE(r.generated.back() == model.eos || id == 9) << id;
    } else {
      EXPECT_EQ(r.finish, FinishReason::kLength) << id;
      EXPECT_EQ(r.generated.size(), 20u);
    }
  }
  EXPECT_EQ(d.records()[8].finish, FinishReason::kLength) << "ignore_eos";
  EXPECT_EQ(d.records()[9].finish, FinishReason::kStop);
  EXPECT_LE(d.records()[9].generated.size(), 3u);
  EXPECT_GT(stopped, 2);
  d.expect_all_released();
}

TEST(EngineScheduler, CancelWhileWaitingMidPrefillMidDecodeAndMidStepFreesEverything) {
  SchedulerConfig c = small_config();
  c.max_num_seqs = 2;
  c.long_prefill_token_threshold = 4;
  Driver d(c, 32, 4, no_eos(), {});
  d.submit(make_request(1, 20, 10));  // long prefill, 4 tokens a step
  d.submit(make_request(2, 2, 10));   // prefilled whole, then decoding
  d.submit(make_request(3, 2, 10));   // waiting: no seat
  d.step();
  d.step();
  EXPECT_EQ(d.scheduler().find(1)->phase, SequencePhase::kPrefill);
  EXPECT_EQ(d.scheduler().find(1)->num_computed_tokens, 8);
  EXPECT_EQ(d.scheduler().find(2)->phase, SequencePhase::kDecode);
  EXPECT_EQ(d.scheduler().find(3)->phase, SequencePhase::kWaiting);

  ASSERT_TRUE(d.cancel(3));  // waiting
  EXPECT_EQ(d.records()[3].finish, FinishReason::kCancelled);
  ASSERT_TRUE(d.cancel(1));  // mid-prefill
  EXPECT_EQ(d.records()[1].finish, FinishReason::kCancelled);
  EXPECT_FALSE(d.kv().contains(1));
  EXPECT_FALSE(d.cancel(1)) << "already gone";
  EXPECT_FALSE(d.cancel(77)) << "never known";
  ASSERT_TRUE(d.cancel(2));  // mid-decode
  EXPECT_EQ(d.records()[2].generated.size(), 2u);
  EXPECT_TRUE(d.scheduler().check_invariants().ok());
  d.expect_all_released();

  // Between schedule_step and the executor's report: reported cancelled at once, released when
  // the executor is done with the plan, and not mentioned by the report.
  d.submit(make_request(4, 3, 5));
  d.submit(make_request(5, 3, 5));
  const StepPlan& plan = d.scheduler().schedule_step();
  ASSERT_EQ(plan.items.size(), 2u);
  ASSERT_TRUE(d.cancel(4));
  EXPECT_EQ(d.records()[4].finish, FinishReason::kCancelled);
  EXPECT_FALSE(d.cancel(4)) << "already cancelled";
  EXPECT_TRUE(d.kv().contains(4)) << "the executor may still write its pages";
  ExecutionResult result;
  ASSERT_TRUE(d.executor().run(plan, result).ok());
  for (const SequenceOutcome& o : d.scheduler().on_step_executed(result)) {
    EXPECT_EQ(o.id, 5u);
    d.apply(o);
  }
  EXPECT_FALSE(d.kv().contains(4));
  EXPECT_EQ(d.scheduler().find(4), nullptr);
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[5].generated, d.reference(5));
  d.expect_all_released();
}

TEST(EngineScheduler, AnItemErrorEndsOnlyThatSequence) {
  Driver d(small_config(), 32, 4, no_eos(), {});
  d.submit(make_request(1, 3, 5));
  d.submit(make_request(2, 3, 5));
  d.executor().fail_item(1, 1);
  d.step();
  d.step();
  EXPECT_EQ(d.records()[1].finish, FinishReason::kError);
  EXPECT_EQ(d.records()[1].message, "injected item failure");
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[2].finish, FinishReason::kLength);
  EXPECT_EQ(d.records()[2].generated, d.reference(2));
  EXPECT_EQ(d.scheduler().stats().errors, 1u);
  d.expect_all_released();
}

TEST(EngineScheduler, AFailedStepEndsItsSequencesAndTheOthersGoOn) {
  SchedulerConfig c = small_config();
  c.max_num_seqs = 2;
  Driver d(c, 32, 4, no_eos(), {});
  d.submit(make_request(1, 3, 5));
  d.submit(make_request(2, 3, 5));
  d.submit(make_request(3, 3, 5));  // waiting during the failed step
  d.executor().fail_step(1);
  d.step();
  d.step();
  EXPECT_EQ(d.records()[1].finish, FinishReason::kError);
  EXPECT_EQ(d.records()[2].finish, FinishReason::kError);
  EXPECT_EQ(d.records()[1].message, "injected step failure");
  ASSERT_TRUE(d.run_to_completion());
  EXPECT_EQ(d.records()[3].generated, d.reference(3));
  d.expect_all_released();
}

TEST(EngineScheduler, AnUnhealthyExecutorEndsEveryRequest) {
  SchedulerConfig c = small_config();
  c.max_num_seqs = 2;
  Driver d(c, 32, 4, no_eos(), {});
  for (SeqId id = 1; id <= 4; ++id) d.submit(make_request(id, 3, 5));
  d.step();
  d.executor().set_healthy(false);
  d.step();
  for (SeqId id = 1; id <= 4; ++id) {
    EXPECT_EQ(d.records()[id].finish, FinishReason::kError) << id;
    EXPECT_EQ(d.records()[id].message, "executor lost") << id;
  }
  EXPECT_FALSE(d.scheduler().has_unfinished());
  d.expect_all_released();
}

TEST(EngineScheduler, AMalformedReportFailsTheStepInsteadOfInventingProgress) {
  Driver d(small_config(), 32, 4, no_eos(), {});
  d.submit(make_request(1, 3, 5));
  d.submit(make_request(2, 3, 5));
  ASSERT_EQ(d.scheduler().schedule_step().items.size(), 2u);
  EXPECT_EQ(&d.scheduler().schedule_step(), &d.scheduler().schedule_step())
      << "an outstanding plan is returned again";
  ExecutionResult short_result;
  short_result.reset(1);
  auto outcomes = d.scheduler().on_step_executed(short_result);
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[0].finish, FinishReason::kError);
  EXPECT_NE(outcomes[0].message.find("1 results for a plan of 2 items"), std::string::npos);
  for (const auto& o : outcomes) d.apply(o);

  d.submit(make_request(3, 3, 5));
  ASSERT_EQ(d.scheduler().schedule_step().items.size(), 1u);
  ExecutionResult no_token;
  no_token.reset(1);  // the item asked for a sample, but no token came back
  auto o2 = d.scheduler().on_step_executed(no_token);
  ASSERT_EQ(o2.size(), 1u);
  EXPECT_EQ(o2[0].finish, FinishReason::kError);
  EXPECT_NE(o2[0].message.find("no valid token"), std::string::npos);
  d.apply(o2[0]);
  d.expect_all_released();
}

TEST(EngineScheduler, RecordsItsEventsInTheProgressLog) {
  Driver d(small_config(), 32, 4, no_eos(), {});
  d.submit(make_request(1, 10, 2));
  ASSERT_TRUE(d.run_to_completion());
  std::vector<ProgressRecord> records(ProgressLog::kCapacity);
  records.resize(d.log().snapshot(records));
  std::vector<ProgressEvent> events;
  for (const auto& r : records)
    if (r.event != ProgressEvent::kStep) events.push_back(r.event);
  EXPECT_EQ(events, (std::vector<ProgressEvent>{
                        ProgressEvent::kEnqueue, ProgressEvent::kAdmit,
                        ProgressEvent::kPrefillChunk, ProgressEvent::kPrefillChunk,
                        ProgressEvent::kDecode, ProgressEvent::kRelease, ProgressEvent::kFinish}));
  EXPECT_EQ(records.back().event, ProgressEvent::kFinish);
  EXPECT_EQ(records.back().a, int64_t(FinishReason::kLength));
  EXPECT_EQ(records.back().b, 2);
}

}  // namespace
}  // namespace drift
