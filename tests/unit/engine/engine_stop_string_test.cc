// Stop strings in the engine's output processor, over the fake executor: a stop string ends the
// request "stop" (not "cancelled": the metrics say so), its events never carry the stop string's
// text or logprobs, and a session keeps the turn — its tokens up to the stop string — so that
// the next turn may follow at once.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_fakes.h"

namespace drift {
namespace {

using namespace testing;
using Tokens = std::vector<TokenId>;

// A reply whose text holds a stop string made of the end of token k's piece and the start of
// token k + 1's, found nowhere earlier in the text.
struct SpanningStop {
  Tokens reply;  // the whole reply without stop strings
  std::string text;
  std::string stop;
  size_t k = 0;
};

std::optional<SpanningStop> spanning_stop(const FakeModel& model, RequestId id,
                                          const Tokens& prompt, int32_t max_tokens) {
  SpanningStop s;
  s.reply = model.reference(id, prompt, max_tokens);
  s.text = expected_text(s.reply, false);
  for (size_t k = 0; k + 1 < s.reply.size(); ++k) {
    const std::string a = fake_piece(s.reply[k]), b = fake_piece(s.reply[k + 1]);
    // Whole ASCII pieces (" w123"): the text up to token k's end is then the repaired bytes of
    // the pieces up to it.
    if (k < 2 || a.size() < 4 || b.size() < 4 || a[0] != ' ' || b[0] != ' ') continue;
    const size_t offset =
        expected_text(std::span<const TokenId>(s.reply).first(k + 1), false).size();
    std::string stop = a.substr(a.size() - 2) + b.substr(0, 3);
    if (s.text.find(stop) != offset - 2) continue;
    s.stop = std::move(stop);
    s.k = k;
    return s;
  }
  return std::nullopt;
}

// Gives every sampled token logprobs whose value is its id (so a test can tell them apart).
FakeHooks logprob_hooks() {
  FakeHooks hooks;
  hooks.after_step = [](const StepPlan& plan, ExecutionResult& result) {
    for (size_t i = 0; i < plan.items.size(); ++i)
      if (result.items[i].token) {
        TokenLogprobs lp;
        lp.logprob = -float(*result.items[i].token);
        result.items[i].logprobs = lp;
      }
    return Status::Ok();
  };
  return hooks;
}

struct Events {
  std::vector<TokenEvent> all;
  std::string text;
  Finish finish;
};

Events collect_events(RequestHandle& h) {
  Events out;
  while (std::optional<TokenEvent> e = h.next_for(std::chrono::seconds(30))) {
    out.text += e->text;
    const bool last = e->finish.has_value();
    if (last) out.finish = *e->finish;
    out.all.push_back(std::move(*e));
    if (last) return out;
  }
  ADD_FAILURE() << "request " << h.id() << " did not finish in time";
  return out;
}

TEST(EngineStopStrings, AStopStringEndsTheRequestAsStopWithoutItsTextOrLogprobs) {
  FakeModel model;
  FakeEngine fake = make_fake_engine(small_config(), model, logprob_hooks());
  std::optional<SpanningStop> s;
  RequestId id = 1;
  for (; id < 200 && !s; ++id) s = spanning_stop(model, id, fake_prompt(id, 6), 24);
  --id;
  ASSERT_TRUE(s) << "no reply of the fake model has a suitable token boundary";

  Request r = token_request(id, 6, 24);
  r.stop = {"never-appears", s->stop};
  r.sampling.logprobs = 0;
  RequestHandle h = fake.engine->submit(std::move(r));
  Events e = collect_events(h);
  ASSERT_EQ(e.finish.reason, FinishReason::kStop) << e.finish.message;
  EXPECT_EQ(e.finish.stop_string, s->stop);
  EXPECT_EQ(e.text, s->text.substr(0, s->text.find(s->stop)));
  // Usage counts every token generated, up to the one that completed the stop string.
  EXPECT_EQ(e.finish.usage.completion_tokens, int32_t(s->k + 2));
  // Token k wrote text before the stop string: it keeps its logprobs. Token k + 1 wrote only
  // the stop string: it goes out with its id alone.
  Tokens tokens;
  for (const TokenEvent& event : e.all) {
    if (!event.token) continue;
    tokens.push_back(*event.token);
    const bool kept = tokens.size() <= s->k + 1;
    EXPECT_EQ(event.logprobs.has_value(), kept) << "token " << tokens.size() - 1;
    if (event.logprobs) EXPECT_EQ(event.logprobs->logprob, -float(*event.token));
    if (!kept) EXPECT_EQ(event.text, "");
  }
  EXPECT_EQ(tokens, Tokens(s->reply.begin(), s->reply.begin() + ptrdiff_t(s->k + 2)));

  EngineMetrics m = metrics_when(*fake.engine, [](const EngineMetrics& m) { return idle(m); });
  EXPECT_EQ(m.finished(FinishReason::kStop), 1u);
  EXPECT_EQ(m.finished(FinishReason::kCancelled), 0u) << "a stop string is no cancel";
}

TEST(EngineStopStrings, ASessionKeepsAStoppedTurnUpToItsStopString) {
  FakeModel model;
  FakeEngine fake = make_fake_engine(small_config(), model);
  std::optional<SpanningStop> s;
  RequestId id = 1;
  for (; id < 200 && !s; ++id) s = spanning_stop(model, id, fake_prompt(id, 6), 24);
  --id;
  ASSERT_TRUE(s);

  Request first = token_request(id, 6, 24);
  first.session_id = "s1";
  first.stop = {s->stop};
  RequestHandle h1 = fake.engine->submit(std::move(first));
  Completion c1 = finish_within(h1);
  ASSERT_EQ(c1.finish.reason, FinishReason::kStop) << c1.finish.message;
  // The history: the prompt and the tokens before the one that wrote only the stop string.
  Tokens history = fake_prompt(id, 6);
  history.insert(history.end(), s->reply.begin(), s->reply.begin() + ptrdiff_t(s->k + 1));
  EXPECT_EQ(fake.engine->session_history("s1"), history);

  // The next turn, at once: the session is free, and its prompt is the history plus the input.
  Request second = token_request(id + 1000, 4, 2);
  second.session_id = "s1";
  RequestHandle h2 = fake.engine->submit(std::move(second));
  Completion c2 = finish_within(h2);
  ASSERT_EQ(c2.finish.reason, FinishReason::kLength) << c2.finish.message;
  EXPECT_EQ(c2.finish.usage.prompt_tokens, int32_t(history.size() + 4));
}

TEST(EngineStopStrings, BadStopStringsAreRefusedByTheEngine) {
  FakeEngine fake = make_fake_engine(small_config());
  std::vector<std::vector<std::string>> bad = {{""},
                                               {std::string(kMaxStopStringBytes + 1, 'x')},
                                               {"\xC3"},
                                               std::vector<std::string>(kMaxStopStrings + 1, "x")};
  for (const std::vector<std::string>& stop : bad) {
    Request r = token_request(1, 4, 2);
    r.stop = stop;
    RequestHandle h = fake.engine->submit(std::move(r));
    Completion c = finish_within(h);
    EXPECT_EQ(c.finish.reason, FinishReason::kRejected);
    EXPECT_EQ(c.finish.reject_reason, RejectReason::kInvalidStop);
    EXPECT_NE(c.finish.message.find("stop string"), std::string::npos) << c.finish.message;
  }
  Request harmony = token_request(2, 4, 2);
  harmony.reply_format = ReplyFormat::kHarmony;  // the fake codec has no harmony markers
  RequestHandle h = fake.engine->submit(std::move(harmony));
  EXPECT_EQ(finish_within(h).finish.reject_reason, RejectReason::kInvalidRequest);
}

}  // namespace
}  // namespace drift
