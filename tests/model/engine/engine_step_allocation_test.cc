// After warm-up, a decode step of the engine on the real model — run_engine_step, i.e.
// scheduler.schedule_step, the CPU executor's run over SmolLM2 and scheduler.on_step_executed —
// performs no heap allocation. Proved with a counting global operator new in this test binary;
// detokenization and event delivery are outside the measured step, as in the engine's worker.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <new>

#include "counting_allocator.h"
#include "engine/engine_step.h"
#include "engine/latency_planner.h"
#include "engine/sampling_defaults.h"
#include "engine/step_cost_model.h"
#include "executor/cpu_executor.h"
#include "kv/kv_groups.h"
#include "kv/prefix_cache.h"
#include "kv_events/kv_event_queue.h"
#include "model/model.h"
#include "scheduler/model_drafter.h"
#include "test_admission.h"
#include "test_models.h"
#include "util/cpu_features.h"

namespace drift {
namespace {

TEST(EngineStepAllocation, CountingAllocatorSeesAllocations) {
  g_counting.store(true);
  uint64_t before = g_allocations.load();
  auto* v = new std::vector<int>(100);
  escape(v);
  escape(v->data());
  delete v;
  g_counting.store(false);
  EXPECT_EQ(g_allocations.load() - before, 2u);
}

// The engine side of `--kv-events-endpoint` (ZmqKVEventPublisher): the prefix cache's events go
// into the publisher's queue; its sending thread, which may allocate, is not part of a step.
class QueueSink final : public KVEventSink {
 public:
  explicit QueueSink(int32_t page_size) : queue_(4096, page_size) {}
  void block_stored(uint64_t hash, std::optional<uint64_t> parent,
                    std::span<const TokenId> tokens) override {
    queue_.push(KVEventKind::kBlockStored, hash, parent, tokens);
  }
  void block_removed(uint64_t hash) override {
    queue_.push(KVEventKind::kBlockRemoved, hash, std::nullopt, {});
  }
  void all_blocks_cleared() override {
    queue_.push(KVEventKind::kAllBlocksCleared, 0, std::nullopt, {});
  }
  KVEventCounts counts() const override { return {.events = queue_.pushed()}; }

 private:
  KVEventQueue queue_;
};

// The scheduler of the decode tests: 4 sequences, and with `spec` drafts from the n-gram pool or
// (`draft_model`) a draft model.
SchedulerConfig decode_scheduler_config(bool spec, bool draft_model) {
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 128;
  sc.max_num_seqs = 4;
  sc.max_model_len = spec ? 1280 : 256;  // room for 60 steps of drafts, most accepted
  if (spec) {
    sc.spec.mode = draft_model ? SpecMode::kDraft : SpecMode::kNgram;
    // The shared pool records every committed token and, keyed by more tokens than the own-history
    // drafter ever matches, is asked for a draft at every decode.
    sc.spec.pool_entries = 1 << 16;
    sc.spec.pool_context = 8;
  }
  return sc;
}

// An executor on 2 threads over `kv`'s pages, sized for the scheduler's steps.
CpuExecutorConfig executor_config(const SchedulerConfig& sc, const KVCacheManager& kv,
                                  kernels::KvFormat format) {
  CpuExecutorConfig ec;
  ec.threads = 2;
  ec.num_pages = kv.num_pages();
  ec.page_size = kv.page_size();
  ec.kv_format = format;
  ec.max_batch_tokens = sc.max_num_batched_tokens;
  ec.max_batch_sequences = sc.max_num_seqs;
  ec.max_context = sc.max_model_len;
  return ec;
}

// Four requests whose decodes cross page boundaries inside the measured steps: two greedy, two
// sampled with the engine's default sampling (top-k 40, top-p, min-p, temperature) and a
// repetition penalty; two ask for logprobs (the chosen token's only, and 5 alternatives). None
// of it may allocate. With n-gram drafts, the prompts repeat themselves.
void add_decode_requests(EngineScheduler& scheduler, bool spec, bool draft_model) {
  auto defaults = resolve_sampling_defaults({}, {}, SamplingDefaultsBase::kModel);
  ASSERT_TRUE(defaults.ok());
  for (SeqId id = 1; id <= 4; ++id) {
    SequenceRequest r;
    r.id = id;
    for (int32_t i = 0; i < 20 + 9 * int32_t(id); ++i)
      r.prompt.push_back(100 + int32_t(id) * 50 + (spec && !draft_model ? i % 7 : i));
    r.max_new_tokens = spec ? 1100 : 40;
    if (id <= 2) {
      r.sampling.temperature = 0;
    } else {
      r.sampling = defaults->params;
      r.sampling.repetition_penalty = 1.1f;
      r.sampling.seed = id;
    }
    if (id % 2 == 0) r.sampling.logprobs = id == 2 ? 0 : 5;
    scheduler.add(testing::admitted(std::move(r)));
  }
}

// The model's layers in KV groups by attention kind when `hybrid` (kv/kv_groups.h), else one.
Expected<KVGrouping> model_kv_grouping(const ModelConfig& mc, bool hybrid) {
  std::vector<int32_t> windows;
  for (int64_t il = 0; il < mc.n_layers; ++il)
    windows.push_back(mc.layers[il].sliding_window ? int32_t(mc.sliding_window) : 0);
  return group_kv_layers(windows, hybrid);
}

// Prefills everything, then a few decodes (first-touch of buffers, pool threads): afterwards the
// four sequences decode.
template <typename Step>
void warm_up(EngineScheduler& scheduler, Step& step) {
  for (int i = 0; i < 4 && scheduler.num_waiting() + scheduler.num_running() > 0; ++i) {
    step();
    if (scheduler.num_waiting() == 0) break;
  }
  for (int i = 0; i < 3; ++i) step();
  for (SeqId id = 1; id <= 4; ++id)
    ASSERT_EQ(scheduler.find(id)->phase, SequencePhase::kDecode) << id;
}

// Runs up to `steps` steps while all four sequences decode, counting the heap allocations they
// make; returns the steps run.
template <typename Step>
int count_decode_steps(Step& step, int steps, uint64_t& allocations) {
  const uint64_t before = g_allocations.load();
  g_counting.store(true);
  int decode_steps = 0;
  for (; decode_steps < steps; ++decode_steps) {
    StepReport report = step();
    if (report.decode_tokens != 4) break;
  }
  g_counting.store(false);
  allocations = g_allocations.load() - before;
  return decode_steps;
}

// The measured steps verified drafts: some accepted, some rejected and rolled back, and with a
// draft model, some of its own accepted.
void expect_drafts_verified(const SchedulerStats& before, const SchedulerStats& after,
                            bool draft_model) {
  EXPECT_GT(after.spec_accepted_tokens, before.spec_accepted_tokens) << "drafts accepted";
  EXPECT_GT(after.spec_draft_tokens - before.spec_draft_tokens,
            after.spec_accepted_tokens - before.spec_accepted_tokens)
      << "and some rejected (rolled back)";
  if (draft_model)
    EXPECT_GT(after.spec_draft_model_accepted_tokens, before.spec_draft_model_accepted_tokens)
        << "the draft model drafted in the measured steps";
}

// With the KV cache in `format` (int8/int4 quantize each K/V row and rotate queries in the
// attention scratch: neither may allocate), on the model at `path` (SmolLM2 by default), and
// optionally a prefix cache that registers the pages the decodes fill and reports them as KV
// events.
// With `hybrid`, the KV pages are split into groups by attention kind (kv/kv_groups.h) and the
// decodes free the sliding groups' pages that leave the window. With `spec`, the decodes carry
// n-gram drafts (the prompts repeat themselves), verified, accepted and rolled back in the
// measured steps, with logprobs for the accepted drafts too. With `draft_model` as well, the
// drafts come from a draft model (the same GGUF, on an executor and KV cache of its own) and the
// prompts do not repeat: its catch-up and draft passes are part of the measured steps.
void expect_decode_steps_allocate_nothing(
    kernels::KvFormat format, bool kv_events = false,
    const std::filesystem::path& path = test::model_path(test::kSmolLm2File), bool hybrid = false,
    bool spec = false, bool draft_model = false) {
  ASSERT_TRUE(test::model_available(path));
  auto isa = select_isa(detect_cpu_features());
  ASSERT_TRUE(isa.ok());
  auto model = Model::load(path.string(), *isa);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const ModelConfig& mc = (*model)->config();

  const SchedulerConfig sc = decode_scheduler_config(spec, draft_model);
  auto grouping = model_kv_grouping(mc, hybrid);
  ASSERT_TRUE(grouping.ok());
  const KVLayout layout = kv_layout_with_groups(
      KVLayout{int32_t(mc.n_layers), int32_t(mc.n_kv_heads), int32_t(mc.head_dim), 16}, *grouping);
  auto kv = KVCacheManager::create(layout, (spec ? 400 : 64) * layout.num_groups());
  ASSERT_TRUE(kv.ok());
  ProgressLog log;
  QueueSink sink(layout.page_size);
  std::unique_ptr<PrefixCache> prefix_cache;
  if (kv_events) prefix_cache = std::make_unique<PrefixCache>(*kv, default_prefix_hash, &sink);
  // The draft model: its own KV cache (one group) and executor, and the drafter over them.
  const KVLayout draft_layout{int32_t(mc.n_layers), int32_t(mc.n_kv_heads), int32_t(mc.head_dim),
                              16};
  auto draft_kv = KVCacheManager::create(draft_layout, draft_model ? 4 * 81 : 1);
  ASSERT_TRUE(draft_kv.ok());
  const ModelDrafterConfig drafter_config{.max_sequences = sc.max_num_seqs,
                                          .max_context = sc.max_model_len,
                                          .max_draft_tokens = sc.spec.max_draft_tokens};
  std::unique_ptr<CpuExecutor> draft_executor;
  std::unique_ptr<ModelDrafter> drafter;
  if (draft_model) {
    CpuExecutorConfig dc = executor_config(sc, *draft_kv, format);
    dc.max_batch_tokens = drafter_config.max_pass_tokens();
    dc.max_context = sc.max_model_len + sc.spec.max_draft_tokens;
    auto created = CpuExecutor::create(**model, dc);
    ASSERT_TRUE(created.ok()) << created.error().message;
    draft_executor = std::move(*created);
    drafter = std::make_unique<ModelDrafter>(*draft_executor, *draft_kv, drafter_config);
  }
  // No EOS: fixed lengths.
  auto scheduler =
      EngineScheduler::create(sc, {}, *kv, log, prefix_cache.get(), nullptr, drafter.get());
  ASSERT_TRUE(scheduler.ok());
  CpuExecutorConfig ec = executor_config(sc, *kv, format);
  ec.max_draft_tokens = sc.spec.max_plan_draft_tokens();
  if (grouping->num_groups() > 1)
    ec.kv_placement =
        KvLayerPlacement{grouping->layers_per_group, grouping->layer_group, grouping->layer_slot};
  auto executor = CpuExecutor::create(**model, ec);
  ASSERT_TRUE(executor.ok()) << executor.error().message;

  add_decode_requests(**scheduler, spec, draft_model);
  ExecutionResult result;
  auto on_plan = [](const StepPlan&) {};
  // The worker's latency machinery is part of the step: the budget from the cost model before
  // it, the model learning the step's time after it.
  StepCostModel costs;
  const LatencyConfig latency;
  auto step = [&] {
    BudgetInputs in;
    in.load = (*scheduler)->load();
    in.max_num_batched_tokens = sc.max_num_batched_tokens;
    (*scheduler)->set_prefill_token_budget(plan_prefill_budget(costs, latency, in));
    StepReport report = run_engine_step(**scheduler, **executor, result, log, on_plan);
    if (report.ran && report.status.ok()) costs.observe(report.shape, report.executor_seconds);
    EXPECT_TRUE(report.status.ok()) << report.status.message();
    for (const SequenceOutcome& o : report.outcomes) {
      EXPECT_NE(o.finish, FinishReason::kError);
      if (o.token) EXPECT_EQ(o.logprobs.has_value(), o.id % 2 == 0) << o.id;
      if (o.logprobs) EXPECT_EQ(o.logprobs->num_top, o.id == 2 ? 0 : 5);
    }
    return report;
  };
  warm_up(**scheduler, step);
  if (::testing::Test::HasFatalFailure()) return;

  const int32_t first_len = (*scheduler)->find(1)->total_len();
  const uint64_t events_before = sink.counts().events;
  const SchedulerStats spec_before = (*scheduler)->stats();
  // With drafts, enough steps that some are rejected and rolled back: a sequence that has fallen
  // into a loop gets every draft accepted for a while.
  const int counted_steps = spec ? 60 : 20;
  uint64_t allocations = 0;
  const int decode_steps = count_decode_steps(step, counted_steps, allocations);
  EXPECT_EQ(decode_steps, counted_steps);
  EXPECT_EQ(allocations, 0u) << "heap allocations in " << decode_steps << " decode steps";
  EXPECT_TRUE(costs.calibrated()) << "the cost model saw prefill and decode steps";
  // Page boundaries were crossed (16 tokens per page).
  EXPECT_GT((*scheduler)->find(1)->total_len() / 16, first_len / 16);
  if (kv_events) EXPECT_GT(sink.counts().events, events_before) << "pages filled and reported";
  if (spec) expect_drafts_verified(spec_before, (*scheduler)->stats(), draft_model);
  if (hybrid) {
    ASSERT_GT(layout.num_groups(), 1);
    EXPECT_EQ(kv->pages(1, 1)[0], kNoPage) << "the sliding group freed what left its window";
  }
}

// Embedding requests prefilled in chunks beside decoding sequences, to their pooled vectors:
// their storage is sized when they are added, so the steps that fold chunks into them and finish
// them allocate nothing either (nor do the decodes beside them).
TEST(EngineStepAllocation, EmbeddingStepsAllocateNothing) {
  const auto path = test::model_path(test::kSmolLm2File);
  ASSERT_TRUE(test::model_available(path));
  auto isa = select_isa(detect_cpu_features());
  ASSERT_TRUE(isa.ok());
  auto model = Model::load(path.string(), *isa);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const ModelConfig& mc = (*model)->config();

  SchedulerConfig sc;
  sc.max_num_batched_tokens = 64;
  sc.max_num_seqs = 4;
  sc.max_model_len = 256;
  // Two prefills progress side by side, 24 tokens a step each.
  sc.max_num_partial_prefills = 2;
  sc.long_prefill_token_threshold = 24;
  KVLayout layout{int32_t(mc.n_layers), int32_t(mc.n_kv_heads), int32_t(mc.head_dim), 16};
  auto kv = KVCacheManager::create(layout, 64);
  ASSERT_TRUE(kv.ok());
  ProgressLog log;
  auto scheduler = EngineScheduler::create(sc, {}, *kv, log);
  ASSERT_TRUE(scheduler.ok());
  CpuExecutorConfig ec;
  ec.threads = 2;
  ec.num_pages = kv->num_pages();
  ec.page_size = layout.page_size;
  ec.max_batch_tokens = sc.max_num_batched_tokens;
  ec.max_batch_sequences = sc.max_num_seqs;
  ec.max_context = sc.max_model_len;
  auto executor = CpuExecutor::create(**model, ec);
  ASSERT_TRUE(executor.ok()) << executor.error().message;

  auto add = [&](SeqId id, int32_t prompt_len, PoolingMode pooling) {
    SequenceRequest r;
    r.id = id;
    for (int32_t i = 0; i < prompt_len; ++i) r.prompt.push_back(200 + int32_t(id) * 40 + i);
    r.sampling.temperature = 0;
    r.max_new_tokens = pooling == PoolingMode::kNone ? 60 : 0;
    r.pooling = pooling;
    if (pooling != PoolingMode::kNone) r.embedding.resize(size_t(mc.n_embd));
    (*scheduler)->add(testing::admitted(std::move(r)));
  };
  ExecutionResult result;
  auto on_plan = [](const StepPlan&) {};
  int embeddings_done = 0;
  auto step = [&] {
    StepReport report = run_engine_step(**scheduler, **executor, result, log, on_plan);
    EXPECT_TRUE(report.status.ok()) << report.status.message();
    for (const SequenceOutcome& o : report.outcomes) {
      EXPECT_NE(o.finish, FinishReason::kError) << o.message;
      if (!o.embedding.empty()) ++embeddings_done;
    }
  };
  // Warm-up: two generations decoding, and one embedding of each mode run to its end.
  add(1, 20, PoolingMode::kNone);
  add(2, 30, PoolingMode::kNone);
  add(3, 40, PoolingMode::kMean);
  add(4, 40, PoolingMode::kLast);
  add(5, 40, PoolingMode::kCls);
  for (int i = 0; i < 20 && embeddings_done < 3; ++i) step();
  ASSERT_EQ(embeddings_done, 3);

  // Measured: two long embeddings, from their second chunk (admission sizes a sequence's page
  // list, as for any request) to their vectors, beside the decodes.
  add(6, 150, PoolingMode::kMean);
  add(7, 130, PoolingMode::kLast);
  step();
  ASSERT_EQ((*scheduler)->find(6)->phase, SequencePhase::kPrefill);
  ASSERT_EQ((*scheduler)->find(7)->phase, SequencePhase::kPrefill);
  uint64_t before = g_allocations.load();
  g_counting.store(true);
  int steps = 0;
  for (; steps < 40 && embeddings_done < 5; ++steps) step();
  g_counting.store(false);
  const uint64_t allocations = g_allocations.load() - before;
  EXPECT_EQ(embeddings_done, 5);
  EXPECT_GT(steps, 4) << "the embeddings took several chunks";
  EXPECT_EQ(allocations, 0u) << "heap allocations in " << steps << " steps";
  EXPECT_EQ((*scheduler)->find(1)->phase, SequencePhase::kDecode) << "decodes went on beside";
}

TEST(EngineStepAllocation, DecodeStepsOnSmolLm2AllocateNothingAfterWarmUp) {
  expect_decode_steps_allocate_nothing(kernels::KvFormat::kF16);
}

// A mixture of experts (the synthetic qwen3moe of tests/data/model): routing, grouping by expert
// and the expert matmuls use scratch sized when the executor is created.
TEST(EngineStepAllocation, DecodeStepsOfAMixtureOfExpertsAllocateNothing) {
  expect_decode_steps_allocate_nothing(
      kernels::KvFormat::kF16, /*kv_events=*/false,
      std::filesystem::path(DRIFT_TEST_DATA_DIR) / "model" / "qwen3moe-synthetic.gguf");
}

// gpt-oss: MXFP4 experts in panels, expert and attention biases, sinks, sliding-window layers.
TEST(EngineStepAllocation, DecodeStepsOfGptOssAllocateNothing) {
  expect_decode_steps_allocate_nothing(
      kernels::KvFormat::kF16, /*kv_events=*/false,
      std::filesystem::path(DRIFT_TEST_DATA_DIR) / "model" / "gpt-oss-synthetic.gguf");
}

TEST(EngineStepAllocation, DecodeStepsThatReportKvEventsAllocateNothing) {
  expect_decode_steps_allocate_nothing(kernels::KvFormat::kF16, /*kv_events=*/true);
}

// gpt-oss (window 16): every few decodes free a sliding page, with the prefix cache registering
// pages and reporting them as events.
TEST(EngineStepAllocation, DecodeStepsThatFreeSlidingWindowPagesAllocateNothing) {
  expect_decode_steps_allocate_nothing(
      kernels::KvFormat::kF16, /*kv_events=*/true,
      std::filesystem::path(DRIFT_TEST_DATA_DIR) / "model" / "gpt-oss-synthetic.gguf",
      /*hybrid=*/true);
}

TEST(EngineStepAllocation, DecodeStepsWithSpeculationAllocateNothing) {
  expect_decode_steps_allocate_nothing(kernels::KvFormat::kF16, /*kv_events=*/true,
                                       test::model_path(test::kSmolLm2File), /*hybrid=*/false,
                                       /*spec=*/true);
}

TEST(EngineStepAllocation, DecodeStepsWithADraftModelAllocateNothing) {
  expect_decode_steps_allocate_nothing(kernels::KvFormat::kF16, /*kv_events=*/true,
                                       test::model_path(test::kSmolLm2File), /*hybrid=*/false,
                                       /*spec=*/true, /*draft_model=*/true);
}

TEST(EngineStepAllocation, DecodeStepsWithAQuantizedKvCacheAllocateNothing) {
  expect_decode_steps_allocate_nothing(kernels::KvFormat::kInt8);
  expect_decode_steps_allocate_nothing(kernels::KvFormat::kInt4);
}

}  // namespace
}  // namespace drift
