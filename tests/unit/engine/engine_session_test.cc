// Conversation sessions through the engine's API, over the fake executor: a turn's prompt is the
// session's history plus its input (the fake model's output depends on every token, so the
// reference output pins the prompt exactly), its KV comes from the prefix cache or — once
// evicted — is rebuilt from the token ids, and end, kill, one-turn-at-a-time, the caps and the
// idle TTL behave as documented.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>

#include "engine/engine.h"
#include "engine_fakes.h"

namespace drift {
namespace {

using namespace testing;
using Tokens = std::vector<TokenId>;

Request turn(RequestId id, const std::string& session, Tokens input, int32_t max_tokens) {
  Request r;
  r.id = id;
  r.prompt = std::move(input);
  r.max_tokens = max_tokens;
  r.session_id = session;
  return r;
}

Tokens concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Where each sequence's first prefill chunk started (recorded on the worker thread).
struct PrefillStarts {
  std::mutex mutex;
  std::map<SeqId, int32_t> first;
  FakeHooks hooks() {
    FakeHooks h;
    h.before_step = [this](const StepPlan& plan) {
      std::lock_guard<std::mutex> lock(mutex);
      for (const StepItem& item : plan.items)
        if (item.kind == StepItemKind::kPrefill) first.emplace(item.seq_id, item.start_position);
    };
    return h;
  }
  int32_t of(SeqId id) {
    std::lock_guard<std::mutex> lock(mutex);
    return first.contains(id) ? first[id] : -1;
  }
};

TEST(EngineSession, ATurnContinuesTheHistoryAndReusesItsCachedKv) {
  PrefillStarts starts;
  FakeModel model;
  FakeEngine fake = make_fake_engine(small_config(), model, starts.hooks());
  const Tokens in1 = fake_prompt(1, 10), in2 = fake_prompt(2, 5);

  RequestHandle h1 = fake.engine->submit(turn(1, "chat", in1, 6));
  Completion c1 = finish_within(h1);
  ASSERT_EQ(c1.finish.reason, FinishReason::kLength) << c1.finish.message;
  EXPECT_EQ(c1.tokens, model.reference(1, in1, 6));
  EXPECT_EQ(fake.engine->session_history("chat"), concat(in1, c1.tokens));

  RequestHandle h2 = fake.engine->submit(turn(2, "chat", in2, 6));
  Completion c2 = finish_within(h2);
  ASSERT_EQ(c2.finish.reason, FinishReason::kLength) << c2.finish.message;
  const Tokens history2 = concat(concat(in1, c1.tokens), in2);
  EXPECT_EQ(c2.tokens, model.reference(2, history2, 6)) << "turn 2 sees history + input";
  EXPECT_EQ(c2.finish.usage.prompt_tokens, 21);
  // Turn 1 wrote K/V for 15 tokens (10 prompt + 5 fed back): pages of 4 hold 12 of them.
  EXPECT_EQ(starts.of(2), 12) << "turn 2's prefill starts after the cached pages";
  EngineMetrics m = fake.engine->metrics();
  EXPECT_EQ(m.prefix_cache.hit_tokens, 12u);
  EXPECT_EQ(m.sessions.open, 1);
  EXPECT_EQ(m.sessions.tokens, 27);
  EXPECT_EQ(fake.engine->session_history("chat"), concat(history2, c2.tokens));
}

TEST(EngineSession, AnEvictedHistoryIsPrefilledAgainFromItsTokenIds) {
  PrefillStarts starts;
  FakeModel model;
  FakeEngine fake = make_fake_engine(small_config(/*kv_pages=*/16), model, starts.hooks());
  const Tokens in1 = fake_prompt(1, 10), in2 = fake_prompt(2, 5);
  RequestHandle h1 = fake.engine->submit(turn(1, "chat", in1, 6));
  Completion c1 = finish_within(h1);
  ASSERT_EQ(c1.finish.reason, FinishReason::kLength);
  // A request that needs all 16 pages evicts every cached one.
  RequestHandle big = fake.engine->submit(token_request(50, 60, 4));
  ASSERT_EQ(finish_within(big).finish.reason, FinishReason::kLength);
  EXPECT_GE(fake.engine->metrics().prefix_cache.evictions, 3u);

  RequestHandle h2 = fake.engine->submit(turn(2, "chat", in2, 6));
  Completion c2 = finish_within(h2);
  ASSERT_EQ(c2.finish.reason, FinishReason::kLength) << c2.finish.message;
  EXPECT_EQ(c2.tokens, model.reference(2, concat(concat(in1, c1.tokens), in2), 6));
  EXPECT_EQ(starts.of(2), 0) << "nothing cached: the whole history is prefilled again";
}

TEST(EngineSession, EndDropsTheHistory) {
  FakeModel model;
  FakeEngine fake = make_fake_engine(small_config(), model);
  Status unknown = fake.engine->end_session("nope");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.message(), "no session nope");
  RequestHandle h1 = fake.engine->submit(turn(1, "chat", fake_prompt(1, 6), 3));
  ASSERT_EQ(finish_within(h1).finish.reason, FinishReason::kLength);
  EXPECT_TRUE(fake.engine->end_session("chat").ok());
  EXPECT_FALSE(fake.engine->session_history("chat"));
  const Tokens in3 = fake_prompt(3, 6);
  RequestHandle h3 = fake.engine->submit(turn(3, "chat", in3, 3));
  Completion c3 = finish_within(h3);
  EXPECT_EQ(c3.tokens, model.reference(3, in3, 3)) << "a new session: the input alone";
}

TEST(EngineSession, KillCancelsTheRunningTurnAndDropsTheSession) {
  StepGate gate([](const StepPlan& plan) { return plan_has(plan, 5, StepItemKind::kDecode); });
  FakeEngine fake = make_fake_engine(small_config(), {}, pause_hooks(gate));
  RequestHandle first = fake.engine->submit(turn(4, "k", fake_prompt(4, 6), 2));
  ASSERT_EQ(finish_within(first).finish.reason, FinishReason::kLength);
  RequestHandle h = fake.engine->submit(turn(5, "k", fake_prompt(5, 6), 50));
  ASSERT_TRUE(gate.wait_paused());
  EXPECT_TRUE(fake.engine->kill_session("k").ok());
  EXPECT_FALSE(fake.engine->session_history("k")) << "gone at once";
  gate.open();
  Completion c = finish_within(h);
  EXPECT_EQ(c.finish.reason, FinishReason::kCancelled);
  EXPECT_LT(c.tokens.size(), 50u);
  EXPECT_FALSE(fake.engine->session_history("k")) << "the cancelled turn recreates nothing";
  EXPECT_FALSE(fake.engine->kill_session("k").ok());
  EXPECT_TRUE(idle(fake.engine->metrics())) << describe(fake.engine->metrics());
  EXPECT_EQ(fake.engine->metrics().sessions.open, 0);
  EXPECT_EQ(fake.engine->metrics().sessions.tokens, 0);
}

TEST(EngineSession, ASecondTurnWhileOneRunsIsRejectedAndChangesNothing) {
  StepGate gate([](const StepPlan& plan) { return plan_has(plan, 1); });
  FakeModel model;
  FakeEngine fake = make_fake_engine(small_config(), model, pause_hooks(gate));
  const Tokens in1 = fake_prompt(1, 6);
  RequestHandle h1 = fake.engine->submit(turn(1, "chat", in1, 4));
  ASSERT_TRUE(gate.wait_paused());
  RequestHandle h2 = fake.engine->submit(turn(2, "chat", fake_prompt(2, 3), 4));
  Completion c2 = finish_within(h2);
  EXPECT_EQ(c2.finish.reason, FinishReason::kRejected);
  EXPECT_NE(c2.finish.message.find("session chat has a turn running (request 1)"),
            std::string::npos)
      << c2.finish.message;
  gate.open();
  Completion c1 = finish_within(h1);
  EXPECT_EQ(c1.finish.reason, FinishReason::kLength);
  EXPECT_EQ(fake.engine->session_history("chat"), concat(in1, c1.tokens));
}

TEST(EngineSession, CapsRejectANewTurnWithAClearErrorAndKeepOtherSessions) {
  EngineConfig config = small_config();
  config.sessions.max_sessions = 1;
  config.sessions.max_total_tokens = 40;
  FakeEngine fake = make_fake_engine(config);
  RequestHandle a = fake.engine->submit(turn(1, "a", fake_prompt(1, 6), 4));
  Completion ca = finish_within(a);
  ASSERT_EQ(ca.finish.reason, FinishReason::kLength);
  const Tokens history_a = *fake.engine->session_history("a");

  RequestHandle b = fake.engine->submit(turn(2, "b", fake_prompt(2, 6), 4));
  Completion cb = finish_within(b);
  EXPECT_EQ(cb.finish.reason, FinishReason::kRejected);
  EXPECT_NE(cb.finish.message.find("too many sessions"), std::string::npos) << cb.finish.message;
  EXPECT_EQ(fake.engine->session_history("a"), history_a);

  // 10 held + 6 input + 30 max_tokens > 40.
  RequestHandle big = fake.engine->submit(turn(3, "a", fake_prompt(3, 6), 30));
  Completion cbig = finish_within(big);
  EXPECT_EQ(cbig.finish.reason, FinishReason::kRejected);
  EXPECT_NE(cbig.finish.message.find("session token cap"), std::string::npos)
      << cbig.finish.message;
  EXPECT_EQ(fake.engine->session_history("a"), history_a);
  EXPECT_EQ(fake.engine->metrics().sessions.rejected_turns, 2u);

  // A turn the engine rejects (too long for max_model_len 128) changes nothing either.
  RequestHandle too_long = fake.engine->submit(turn(4, "a", fake_prompt(4, 120), 4));
  EXPECT_EQ(finish_within(too_long).finish.reason, FinishReason::kRejected);
  EXPECT_EQ(fake.engine->session_history("a"), history_a);
}

TEST(EngineSession, IdleSessionsExpire) {
  EngineConfig config = small_config();
  config.sessions.idle_ttl_seconds = 0.05;
  FakeEngine fake = make_fake_engine(config);
  RequestHandle h = fake.engine->submit(turn(1, "chat", fake_prompt(1, 6), 2));
  ASSERT_EQ(finish_within(h).finish.reason, FinishReason::kLength);
  EXPECT_EQ(fake.engine->metrics().sessions.open, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EngineMetrics m = fake.engine->metrics();
  EXPECT_EQ(m.sessions.open, 0);
  EXPECT_EQ(m.sessions.expired, 1u);
  EXPECT_FALSE(fake.engine->session_history("chat"));
}

// The server tokenizes a turn on its prompt worker (tokenize_turn) and submits later on its I/O
// thread: the tokens are used when the session still stands as they assumed, and the text is
// encoded again when it does not (here: turn 2 tokenized while turn 1 still ran, so with a BOS
// that a continuing turn must not have).
TEST(EngineSession, ATurnTokenizedAheadIsUsedUnlessTheSessionChangedMeanwhile) {
  FakeEngine fake = make_fake_engine(small_config());
  auto text_turn = [](const char* text) {
    Request r;
    r.prompt = TextPrompt{text, /*add_special=*/true, false};
    r.max_tokens = 2;
    r.session_id = "chat";
    return r;
  };
  Request t1 = text_turn("hi");
  Expected<TokenizedTurn> ahead1 = fake.engine->tokenize_turn(t1.prompt, t1.session_id);
  ASSERT_TRUE(ahead1.ok());
  EXPECT_FALSE(ahead1->continues_session);
  EXPECT_EQ(ahead1->tokens, *fake.engine->tokenize(TextPrompt{"hi", true, false}));
  EXPECT_EQ(ahead1->tokens.front(), kBos);
  Request t2 = text_turn("yo");
  Expected<TokenizedTurn> stale = fake.engine->tokenize_turn(t2.prompt, t2.session_id);
  ASSERT_TRUE(stale.ok());
  // Tokens submit runs as they are when the session fact holds: these differ from the text's
  // encoding, to tell which was run.
  Tokens given = ahead1->tokens;
  given.push_back(given.back());
  t1.tokenized = TokenizedTurn{given, false};
  RequestHandle h1 = fake.engine->submit(std::move(t1));
  Completion c1 = finish_within(h1);
  EXPECT_EQ(c1.finish.usage.prompt_tokens, 4) << "the tokens given";
  t2.tokenized = std::move(*stale);
  RequestHandle h2 = fake.engine->submit(std::move(t2));
  Completion c2 = finish_within(h2);
  EXPECT_EQ(c2.finish.usage.prompt_tokens, 4 + 2 + 2) << "history, then y, o encoded again";
  Tokens history = *fake.engine->session_history("chat");
  EXPECT_EQ(std::count(history.begin(), history.end(), kBos), 1);
  Request t3 = text_turn("ok");
  Expected<TokenizedTurn> ahead3 = fake.engine->tokenize_turn(t3.prompt, t3.session_id);
  ASSERT_TRUE(ahead3.ok());
  EXPECT_TRUE(ahead3->continues_session);
  EXPECT_EQ(ahead3->tokens, *fake.engine->tokenize(TextPrompt{"ok", false, false})) << "no BOS";
}

TEST(EngineSession, ATextTurnThatContinuesASessionGetsNoSecondBos) {
  FakeEngine fake = make_fake_engine(small_config());
  Request t1;
  t1.prompt = TextPrompt{"hi", /*add_special=*/true, false};
  t1.max_tokens = 2;
  t1.session_id = "chat";
  RequestHandle h1 = fake.engine->submit(std::move(t1));
  Completion c1 = finish_within(h1);
  EXPECT_EQ(c1.finish.usage.prompt_tokens, 3) << "BOS, h, i";
  Request t2;
  t2.prompt = TextPrompt{"yo", /*add_special=*/true, false};
  t2.max_tokens = 2;
  t2.session_id = "chat";
  RequestHandle h2 = fake.engine->submit(std::move(t2));
  Completion c2 = finish_within(h2);
  EXPECT_EQ(c2.finish.usage.prompt_tokens, 3 + 2 + 2) << "history, then y, o without BOS";
  Tokens history = *fake.engine->session_history("chat");
  ASSERT_EQ(history.size(), 9u);
  EXPECT_EQ(std::count(history.begin(), history.end(), kBos), 1);
}

TEST(EngineSession, ConfigIsValidatedWithTheFieldName) {
  EngineConfig config = small_config();
  config.sessions.max_sessions = 0;
  auto engine = Engine::create(
      config, fake_model_facts(), std::make_shared<FakeCodec>(),
      [](const EngineSetup& setup) -> Expected<std::unique_ptr<Executor>> {
        return std::unique_ptr<Executor>(new FakeExecutor(setup, FakeModel{}, FakeHooks{}));
      });
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.error().message.find("sessions.max_sessions"), std::string::npos);
}

}  // namespace
}  // namespace drift
