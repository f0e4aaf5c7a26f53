// What a caller of the engine sees for single requests: tokens, text, finish reasons, usage,
// timings, immediate rejections with sizes, overload, callback delivery and metrics.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <thread>

#include "engine_fakes.h"

namespace drift {
namespace {

using namespace testing;
using std::chrono::milliseconds;

TEST(Engine, TokenPromptGeneratesTheModelsTokensAndText) {
  FakeModel model;
  FakeEngine fake = make_fake_engine(small_config(), model);
  Request r = token_request(7, 10, 12);
  std::vector<TokenId> prompt = std::get<std::vector<TokenId>>(r.prompt);
  RequestHandle h = fake.engine->submit(r);
  EXPECT_EQ(h.id(), 7u);
  Completion c = finish_within(h);
  std::vector<TokenId> want = model.reference(7, prompt, 12);
  EXPECT_EQ(c.tokens, want);
  EXPECT_EQ(c.text, expected_text(want, false));
  EXPECT_EQ(c.finish.reason, FinishReason::kLength);
  EXPECT_EQ(c.finish.usage.prompt_tokens, 10);
  EXPECT_EQ(c.finish.usage.completion_tokens, 12);
  ASSERT_TRUE(c.finish.timings.queue_seconds);
  ASSERT_TRUE(c.finish.timings.time_to_first_token_seconds);
  EXPECT_LE(*c.finish.timings.queue_seconds, *c.finish.timings.time_to_first_token_seconds);
  EXPECT_LE(*c.finish.timings.time_to_first_token_seconds, c.finish.timings.end_to_end_seconds);
  EXPECT_FALSE(h.next().has_value()) << "nothing after the finish event";
  EXPECT_TRUE(h.finished());
}

TEST(Engine, EveryTextDeltaIsValidUtf8AndTheyConcatenateToTheDecode) {
  FakeModel model;
  FakeEngine fake = make_fake_engine(small_config(), model);
  int broken_characters_seen = 0;
  for (RequestId id = 1; id <= 12; ++id) {
    Request r = token_request(id, 6, 40);
    std::vector<TokenId> prompt = std::get<std::vector<TokenId>>(r.prompt);
    RequestHandle h = fake.engine->submit(r);
    std::string text;
    std::vector<TokenId> tokens;
    while (std::optional<TokenEvent> e = h.next()) {
      EXPECT_EQ(valid_utf8_prefix_length(e->text), e->text.size()) << "request " << id;
      if (e->token) tokens.push_back(*e->token);
      text += e->text;
    }
    EXPECT_EQ(text, expected_text(model.reference(id, prompt, 40), false)) << "request " << id;
    for (TokenId t : tokens) broken_characters_seen += t % 16 == 3 || t % 16 == 6;
  }
  EXPECT_GT(broken_characters_seen, 0) << "the test should exercise split characters";
}

TEST(Engine, TextPromptIsTokenizedWithTheRequestsOptions) {
  FakeModel model;
  FakeEngine fake = make_fake_engine(small_config(), model);
  Request r;
  r.id = 3;
  r.prompt = TextPrompt{"hello", /*add_special=*/true, /*parse_special=*/false};
  r.max_tokens = 5;
  RequestHandle h = fake.engine->submit(r);
  Completion c = finish_within(h);
  std::vector<TokenId> prompt = FakeCodec().encode(TextPrompt{"hello", true, false});
  ASSERT_EQ(prompt.size(), 6u);  // BOS + 5 bytes
  EXPECT_EQ(c.tokens, model.reference(3, prompt, 5));
  EXPECT_EQ(c.finish.usage.prompt_tokens, 6);
}

TEST(Engine, EosAndStopTokensFinishWithStopAndShowNoText) {
  FakeModel model{.eos_one_in = 7};
  FakeEngine fake = make_fake_engine(small_config(), model);
  int stops = 0;
  for (RequestId id = 1; id <= 20; ++id) {
    Request r = token_request(id, 5, 30);
    std::vector<TokenId> prompt = std::get<std::vector<TokenId>>(r.prompt);
    RequestHandle h = fake.engine->submit(r);
    Completion c = finish_within(h);
    std::vector<TokenId> want = model.reference(id, prompt, 30);
    EXPECT_EQ(c.tokens, want);
    bool stopped = want.back() == kEos;
    EXPECT_EQ(c.finish.reason, stopped ? FinishReason::kStop : FinishReason::kLength);
    EXPECT_EQ(c.text, expected_text(want, stopped));
    stops += stopped;
  }
  EXPECT_GT(stops, 0);

  // A stop token id of the request's own; ignore_eos keeps going past EOS.
  Request r = token_request(50, 5, 30);
  std::vector<TokenId> prompt = std::get<std::vector<TokenId>>(r.prompt);
  std::vector<TokenId> free_run = FakeModel{}.reference(50, prompt, 30);
  FakeEngine plain = make_fake_engine(small_config());
  r.sampling.stop_token_ids = {free_run[4]};
  RequestHandle h = plain.engine->submit(r);
  Completion c = finish_within(h);
  EXPECT_EQ(c.finish.reason, FinishReason::kStop);
  EXPECT_EQ(c.tokens, std::vector<TokenId>(free_run.begin(), free_run.begin() + 5));
  EXPECT_EQ(c.text, expected_text(c.tokens, true));
}

// Allows every token and is complete after `length` of them.
class CompleteAfter final : public TokenConstraint {
 public:
  explicit CompleteAfter(size_t length) : length_(length) {}
  Status fill_mask(std::span<uint32_t> mask) override {
    std::fill(mask.begin(), mask.end(), ~0u);
    return Status::Ok();
  }
  Status accept(int32_t) override {
    ++accepted;
    return Status::Ok();
  }
  bool complete() const override { return accepted >= length_; }
  std::unique_ptr<TokenConstraint> clone() const override {
    return std::make_unique<CompleteAfter>(*this);
  }
  size_t accepted = 0;

 private:
  size_t length_;
};

// The server compiles a grammar off its I/O thread and submits the compiled matcher: every
// request (or choice) given it must follow it from the start, none may advance the one shared.
TEST(Engine, RequestsSharingACompiledGrammarEachFollowItFromTheStart) {
  FakeModel model;
  FakeEngine fake = make_fake_engine(small_config(), model);
  auto compiled = std::make_shared<CompleteAfter>(3);
  std::vector<RequestHandle> handles;
  for (RequestId id : {21, 22, 23}) {
    Request r = token_request(id, 6, 10);
    r.compiled_grammar = compiled;
    handles.push_back(fake.engine->submit(std::move(r)));
  }
  for (RequestHandle& h : handles) {
    Completion c = finish_within(h);
    EXPECT_EQ(c.finish.reason, FinishReason::kStop) << c.finish.message;
    EXPECT_EQ(c.tokens.size(), 3u);
  }
  EXPECT_EQ(compiled->accepted, 0u);
}

TEST(Engine, DefaultMaxTokensIsCappedByTheRemainingContext) {
  EngineConfig config = small_config();
  config.default_max_tokens = 16;
  config.max_model_len = 64;
  FakeEngine fake = make_fake_engine(config);
  Request r = token_request(1, 10, 1);
  r.max_tokens.reset();
  RequestHandle a = fake.engine->submit(r);
  EXPECT_EQ(finish_within(a).finish.usage.completion_tokens, 16);
  r = token_request(2, 60, 1);
  r.max_tokens.reset();
  RequestHandle b = fake.engine->submit(r);
  Completion c = finish_within(b);
  EXPECT_EQ(c.finish.reason, FinishReason::kLength);
  EXPECT_EQ(c.finish.usage.completion_tokens, 4);  // 64 - 60
}

TEST(Engine, WithoutADefaultMaxTokensARequestRunsToTheEndOfTheContext) {
  EngineConfig config = small_config();
  config.default_max_tokens.reset();
  config.max_model_len = 64;
  FakeEngine fake = make_fake_engine(config);
  Request r = token_request(1, 10, 1);
  r.max_tokens.reset();
  r.sampling.ignore_eos = true;
  RequestHandle h = fake.engine->submit(r);
  Completion c = finish_within(h);
  EXPECT_EQ(c.finish.reason, FinishReason::kLength);
  EXPECT_EQ(c.finish.usage.completion_tokens, 54);  // 64 - 10
}

// A rejected request's only event is already there when submit returns.
Finish rejection_of(Engine& engine, Request r) {
  RequestHandle h = engine.submit(std::move(r));
  std::optional<TokenEvent> e = h.next_for(milliseconds(0));
  EXPECT_TRUE(e && e->finish) << "no immediate finish event";
  if (!e || !e->finish) return {};
  EXPECT_FALSE(e->token);
  EXPECT_FALSE(h.next_for(milliseconds(0)));
  return *e->finish;
}

TEST(Engine, RequestsThatCanNeverRunAreRejectedAtOnceWithTheSizes) {
  FakeEngine fake = make_fake_engine(small_config(/*kv_pages=*/16));  // 64 tokens of KV
  Engine& engine = *fake.engine;

  Finish f = rejection_of(engine, token_request(1, 100, 40));
  EXPECT_EQ(f.reason, FinishReason::kRejected);
  EXPECT_EQ(f.message, "100 prompt tokens + 40 max_tokens = 140 exceed max_model_len 128");
  EXPECT_EQ(f.usage.prompt_tokens, 100);
  EXPECT_EQ(f.usage.completion_tokens, 0);
  EXPECT_FALSE(f.timings.queue_seconds);

  f = rejection_of(engine, token_request(2, 50, 20));
  EXPECT_EQ(
      f.message,
      "the request can never fit in the KV cache: 50 prompt + 20 max new tokens need 18 pages "
      "of 4 tokens, but the cache has 16 pages (64 tokens)");

  f = rejection_of(engine, token_request(3, 128, 1));
  EXPECT_EQ(f.message,
            "the prompt has 128 tokens, but max_model_len is 128: no room "
            "to generate");

  Request r = token_request(4, 5, 0);
  EXPECT_EQ(rejection_of(engine, r).message, "max_tokens must be >= 1, got 0");
  r = token_request(5, 5, 5);
  std::get<std::vector<TokenId>>(r.prompt)[2] = kVocab;
  EXPECT_EQ(rejection_of(engine, r).message,
            "prompt token 1000 at position 2 is outside the vocabulary of 1000");
  r = token_request(6, 5, 5);
  r.sampling.top_p = 0;
  EXPECT_EQ(rejection_of(engine, r).message, "sampling: top_p must be in (0, 1], got 0");
  r = token_request(7, 0, 5);
  EXPECT_EQ(rejection_of(engine, r).message, "the prompt is empty");
  r = token_request(8, 5, 5);
  r.id = kFirstEngineAssignedId + 1;
  EXPECT_NE(rejection_of(engine, r).message.find("is reserved"), std::string::npos);

  EngineMetrics m = engine.metrics();
  EXPECT_EQ(m.finished(FinishReason::kRejected), 8u);
  EXPECT_EQ(m.steps, 0u) << "nothing reached the executor";
}

TEST(Engine, DuplicateIdOfAnUnfinishedRequestIsRejected) {
  StepGate gate([](const StepPlan& plan) { return plan_has(plan, 1); });
  FakeHooks hooks = pause_hooks(gate);
  FakeEngine fake = make_fake_engine(small_config(), {}, hooks);
  RequestHandle a = fake.engine->submit(token_request(1, 5, 5));
  ASSERT_TRUE(gate.wait_paused());
  RequestHandle b = fake.engine->submit(token_request(1, 5, 5));
  gate.open();
  EXPECT_EQ(finish_within(a).finish.reason, FinishReason::kLength);
  Completion c = finish_within(b);
  EXPECT_EQ(c.finish.reason, FinishReason::kRejected);
  EXPECT_EQ(c.finish.message, "request id 1 is in use by an unfinished request");
  // Once the first has finished, its id may be used again.
  RequestHandle again = fake.engine->submit(token_request(1, 5, 5));
  EXPECT_EQ(finish_within(again).finish.reason, FinishReason::kLength);
}

TEST(Engine, EngineAssignsDistinctIdsWhenNoneIsGiven) {
  FakeEngine fake = make_fake_engine(small_config());
  Request r = token_request(0, 4, 2);
  r.id.reset();
  RequestHandle a = fake.engine->submit(r);
  RequestHandle b = fake.engine->submit(r);
  EXPECT_GE(a.id(), kFirstEngineAssignedId);
  EXPECT_NE(a.id(), b.id());
  EXPECT_EQ(finish_within(a).finish.reason, FinishReason::kLength);
  EXPECT_EQ(finish_within(b).finish.reason, FinishReason::kLength);
}

TEST(Engine, FullQueueRejectsAtOnceAsOverloaded) {
  EngineConfig config = small_config();
  config.max_queued_requests = 3;
  StepGate gate([](const StepPlan& plan) { return plan_has(plan, 1); });
  FakeHooks hooks = pause_hooks(gate);
  FakeEngine fake = make_fake_engine(config, {}, hooks);
  RequestHandle running = fake.engine->submit(token_request(1, 5, 5));
  ASSERT_TRUE(gate.wait_paused());  // request 1 is in a step: admitted, no longer queued
  std::vector<RequestHandle> queued;
  for (RequestId id = 2; id <= 4; ++id)
    queued.push_back(fake.engine->submit(token_request(id, 5, 5)));
  for (RequestHandle& h : queued) EXPECT_FALSE(h.next_for(milliseconds(0))) << h.id();
  EXPECT_EQ(fake.engine->metrics().num_waiting, 3);

  Finish f = rejection_of(*fake.engine, token_request(5, 5, 5));
  EXPECT_EQ(f.reason, FinishReason::kRejected);
  EXPECT_EQ(f.message,
            "overloaded: 3 requests are already waiting to be admitted (max_queued_requests is "
            "3); retry later");

  gate.open();
  EXPECT_EQ(finish_within(running).finish.reason, FinishReason::kLength);
  for (RequestHandle& h : queued) EXPECT_EQ(finish_within(h).finish.reason, FinishReason::kLength);
  RequestHandle later = fake.engine->submit(token_request(6, 5, 5));
  EXPECT_EQ(finish_within(later).finish.reason, FinishReason::kLength);
}

TEST(Engine, CallbackDeliveryGetsEveryEventInOrderOnTheWorker) {
  FakeModel model;
  FakeEngine fake = make_fake_engine(small_config(), model);
  std::mutex mutex;
  std::condition_variable done;
  std::vector<TokenEvent> events;
  std::thread::id callback_thread;
  Request r = token_request(9, 7, 10);
  std::vector<TokenId> prompt = std::get<std::vector<TokenId>>(r.prompt);
  RequestHandle h = fake.engine->submit(r, [&](TokenEvent e) {
    std::lock_guard<std::mutex> lock(mutex);
    callback_thread = std::this_thread::get_id();
    events.push_back(std::move(e));
    done.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(mutex);
    ASSERT_TRUE(done.wait_for(lock, std::chrono::seconds(20),
                              [&] { return !events.empty() && events.back().finish; }));
  }
  EXPECT_NE(callback_thread, std::this_thread::get_id());
  std::vector<TokenId> tokens;
  for (const TokenEvent& e : events) {
    if (e.token) tokens.push_back(*e.token);
  }
  EXPECT_EQ(tokens, model.reference(9, prompt, 10));
  EXPECT_EQ(events.back().finish->reason, FinishReason::kLength);
  EXPECT_TRUE(h.finished());
  EXPECT_FALSE(h.next_for(milliseconds(0))) << "callback delivery queues nothing";
  EXPECT_FALSE(h.wait().ok());
}

TEST(Engine, ImmediateRejectionReachesTheCallbackBeforeSubmitReturns) {
  FakeEngine fake = make_fake_engine(small_config());
  std::optional<Finish> got;
  RequestHandle h =
      fake.engine->submit(token_request(1, 500, 5), [&](TokenEvent e) { got = e.finish; });
  ASSERT_TRUE(got);
  EXPECT_EQ(got->reason, FinishReason::kRejected);
}

TEST(Engine, MetricsCountStepsTokensFinishesAndLatencies) {
  FakeEngine fake = make_fake_engine(small_config());
  std::vector<RequestHandle> handles;
  for (RequestId id = 1; id <= 6; ++id)
    handles.push_back(fake.engine->submit(token_request(id, 9, 8)));
  for (RequestHandle& h : handles) EXPECT_EQ(finish_within(h).finish.reason, FinishReason::kLength);
  EngineMetrics m = fake.engine->metrics();
  EXPECT_TRUE(m.healthy);
  EXPECT_TRUE(idle(m)) << describe(m);
  EXPECT_EQ(m.kv_pages_total, 64);
  EXPECT_EQ(m.kv_pages_used, 0);
  EXPECT_EQ(m.finished(FinishReason::kLength), 6u);
  EXPECT_EQ(m.finished_total(), 6u);
  EXPECT_EQ(m.prefill_tokens_total, 6u * 9);
  EXPECT_EQ(m.decode_tokens_total, 6u * 7);  // the first token comes from the prefill
  EXPECT_EQ(m.generation_tokens_total, 6u * 8);
  EXPECT_EQ(m.prompt_tokens_total, 6u * 9);
  EXPECT_EQ(m.steps, fake.executor->steps());
  EXPECT_EQ(m.queue_time.count, 6u);
  EXPECT_EQ(m.time_to_first_token.count, 6u);
  EXPECT_EQ(m.inter_token_latency.count, 6u * 7);
  EXPECT_EQ(m.end_to_end.count, 6u);
  uint64_t in_buckets = 0;
  for (uint64_t c : m.end_to_end.counts) in_buckets += c;
  EXPECT_EQ(in_buckets, 6u);
  EXPECT_EQ(m.end_to_end.counts.size(), std::size(kEndToEndBuckets) + 1);
}

TEST(Histogram, ValuesLandInTheirLeBucket) {
  Histogram h = Histogram::with_bounds(std::vector<double>{0.1, 1.0});
  for (double v : {0.05, 0.1, 0.5, 1.0, 7.0}) h.observe(v);
  EXPECT_EQ(h.counts, (std::vector<uint64_t>{2, 2, 1}));
  EXPECT_EQ(h.count, 5u);
  EXPECT_DOUBLE_EQ(h.sum, 8.65);
}

}  // namespace
}  // namespace drift
