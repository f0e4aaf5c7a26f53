// The session store alone, on a synthetic clock: histories grow by completed turns only, one turn
// at a time, idle sessions expire, and the caps refuse new turns without touching other sessions.
#include "engine/session_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace drift {
namespace {

using Tokens = std::vector<TokenId>;
using Clock = SessionStore::Clock;
using std::chrono::seconds;

const Clock::time_point t0 = Clock::time_point{} + seconds(1000);

// Sizes every turn at `max_new` tokens, or fails with "too long" beyond `max_prompt`.
struct Sizer {
  int32_t max_new = 4;
  size_t max_prompt = 1000;
  Expected<int32_t> operator()(std::span<const TokenId> prompt) const {
    if (prompt.size() > max_prompt) return make_error("too long: {}", prompt.size());
    return max_new;
  }
};

Expected<Tokens> begin(SessionStore& store, const std::string& id, RequestId request,
                       const Tokens& input, Clock::time_point now = t0, Sizer sizer = {}) {
  return store.begin_turn(id, request, {}, input, sizer, now);
}

TEST(SessionStore, ATurnsPromptIsTheHistoryThenItsInputAndCompletedTurnsGrowTheHistory) {
  SessionStore store(SessionConfig{});
  auto p1 = begin(store, "a", 1, {10, 11});
  ASSERT_TRUE(p1.ok());
  EXPECT_EQ(*p1, (Tokens{10, 11}));
  store.end_turn("a", 1, Tokens{20, 21, 22}, /*completed=*/true, t0);
  EXPECT_EQ(store.history("a", t0), (Tokens{10, 11, 20, 21, 22}));
  auto p2 = begin(store, "a", 2, {12});
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(*p2, (Tokens{10, 11, 20, 21, 22, 12}));
  EXPECT_EQ(store.history("a", t0), (Tokens{10, 11, 20, 21, 22}))
      << "the input joins on completion";
  // A turn that does not complete leaves the history as before it.
  store.end_turn("a", 2, Tokens{30}, /*completed=*/false, t0);
  EXPECT_EQ(store.history("a", t0), (Tokens{10, 11, 20, 21, 22}));
  EXPECT_TRUE(store.has_history("a", t0));
  SessionStats s = store.stats(t0);
  EXPECT_EQ(s.open, 1);
  EXPECT_EQ(s.tokens, 5);
}

TEST(SessionStore, AFailedFirstTurnLeavesNoSession) {
  SessionStore store(SessionConfig{});
  ASSERT_TRUE(begin(store, "a", 1, {10}).ok());
  store.end_turn("a", 1, {}, /*completed=*/false, t0);
  EXPECT_FALSE(store.history("a", t0));
  EXPECT_EQ(store.stats(t0).open, 0);
  EXPECT_EQ(store.stats(t0).tokens, 0);
}

TEST(SessionStore, OneTurnAtATime) {
  SessionStore store(SessionConfig{});
  ASSERT_TRUE(begin(store, "a", 1, {10}).ok());
  auto second = begin(store, "a", 2, {11});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("has a turn running (request 1)"), std::string::npos)
      << second.error().message;
  EXPECT_EQ(store.stats(t0).rejected_turns, 1u);
  store.end_turn("a", 2, Tokens{99}, true, t0);  // not its turn: ignored
  EXPECT_EQ(store.history("a", t0), (Tokens{})) << "turn 1 is still running";
  store.end_turn("a", 1, Tokens{20}, true, t0);
  EXPECT_EQ(store.history("a", t0), (Tokens{10, 20}));
}

TEST(SessionStore, ASizingErrorChangesNothing) {
  SessionStore store(SessionConfig{});
  ASSERT_TRUE(begin(store, "a", 1, {10, 11}).ok());
  store.end_turn("a", 1, Tokens{20}, true, t0);
  Sizer strict;
  strict.max_prompt = 3;
  auto r = begin(store, "a", 2, {12}, t0, strict);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "too long: 4");
  EXPECT_EQ(store.history("a", t0), (Tokens{10, 11, 20}));
  EXPECT_TRUE(begin(store, "a", 3, {12}).ok()) << "not left running";
}

TEST(SessionStore, IdleSessionsExpireAfterTheirTtlButRunningOnesDoNot) {
  SessionConfig c;
  c.idle_ttl_seconds = 60;
  SessionStore store(c);
  ASSERT_TRUE(begin(store, "idle", 1, {10}).ok());
  store.end_turn("idle", 1, Tokens{20}, true, t0);
  ASSERT_TRUE(begin(store, "busy", 2, {10}).ok());  // never ends within the test
  EXPECT_EQ(store.stats(t0 + seconds(60)).open, 2) << "exactly the TTL: still there";
  SessionStats s = store.stats(t0 + seconds(61));
  EXPECT_EQ(s.open, 1);
  EXPECT_EQ(s.expired, 1u);
  EXPECT_FALSE(store.history("idle", t0 + seconds(61)));
  EXPECT_TRUE(store.history("busy", t0 + seconds(61)));
  // A later turn with the expired id opens a new, empty session.
  auto p = begin(store, "idle", 3, {11}, t0 + seconds(62));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (Tokens{11}));
}

TEST(SessionStore, TheSessionATurnNamesExpiresExactlyEvenBetweenSweeps) {
  SessionConfig c;
  c.idle_ttl_seconds = 60;
  SessionStore store(c);
  ASSERT_TRUE(begin(store, "a", 1, {10}).ok());
  store.end_turn("a", 1, Tokens{20}, true, t0);
  const auto ms = [](int n) { return std::chrono::milliseconds(n); };
  EXPECT_EQ(store.stats(t0 + ms(59500)).open, 1);  // a sweep; the next one not before 60.5 s
  EXPECT_FALSE(store.has_history("a", t0 + ms(60300))) << "expired, though not swept yet";
  auto p = begin(store, "a", 2, {11}, t0 + ms(60300));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (Tokens{11}));
  EXPECT_EQ(store.stats(t0 + ms(60300)).expired, 1u);
}

TEST(SessionStore, TheSessionCountCapRefusesANewSessionAndKeepsTheOthers) {
  SessionConfig c;
  c.max_sessions = 2;
  c.idle_ttl_seconds = 60;
  SessionStore store(c);
  for (RequestId i = 1; i <= 2; ++i) {
    const std::string id = "s" + std::to_string(i);
    ASSERT_TRUE(begin(store, id, i, {TokenId(i)}).ok());
    store.end_turn(id, i, Tokens{TokenId(10 * i)}, true, t0);
  }
  auto third = begin(store, "s3", 3, {3}, t0 + seconds(10));
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.error().message.find("too many sessions: all 2 (sessions.max_sessions)"),
            std::string::npos)
      << third.error().message;
  EXPECT_EQ(store.history("s1", t0), (Tokens{1, 10}));
  EXPECT_EQ(store.history("s2", t0), (Tokens{2, 20}));
  EXPECT_TRUE(begin(store, "s1", 4, {5}, t0 + seconds(10)).ok()) << "existing sessions go on";
  // Once s2 has been idle past the TTL, its place is free.
  EXPECT_TRUE(begin(store, "s3", 5, {3}, t0 + seconds(61)).ok());
}

TEST(SessionStore, TheTokenCapCountsRunningTurnsAtTheirWorstCase) {
  SessionConfig c;
  c.max_total_tokens = 20;
  SessionStore store(c);
  Sizer eight;
  eight.max_new = 8;
  ASSERT_TRUE(begin(store, "a", 1, {1, 2, 3, 4}, t0, eight).ok());  // holds 4 + 8
  EXPECT_EQ(store.stats(t0).tokens, 12);
  auto b = begin(store, "b", 2, {1, 2, 3, 4, 5}, t0);  // 5 + 4 more: 21 > 20
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("session token cap: this turn needs up to 9 tokens (5 prompt "
                                   "+ 4 max_tokens), but sessions hold 12 of 20"),
            std::string::npos)
      << b.error().message;
  store.end_turn("a", 1, Tokens{9, 9}, true, t0);  // 6 held now
  EXPECT_EQ(store.stats(t0).tokens, 6);
  EXPECT_TRUE(begin(store, "b", 2, {1, 2, 3, 4, 5}, t0).ok());
  EXPECT_EQ(store.stats(t0).tokens, 15);
  EXPECT_EQ(store.history("a", t0), (Tokens{1, 2, 3, 4, 9, 9}));
}

TEST(SessionStore, EndDropsTheSessionAndHandsBackItsRunningTurn) {
  SessionStore store(SessionConfig{});
  auto stream = std::make_shared<RequestStream>(7, EventCallback{});
  Sizer sizer;
  ASSERT_TRUE(store.begin_turn("a", 7, stream, Tokens{1}, sizer, t0).ok());
  auto ended = store.end("a");
  ASSERT_TRUE(ended.ok());
  EXPECT_EQ(ended->get(), stream.get());
  EXPECT_EQ(store.stats(t0).tokens, 0);
  EXPECT_FALSE(store.end("a").ok());
  // The id is reused by a new session before the old turn reports: the report is ignored.
  ASSERT_TRUE(begin(store, "a", 8, {5}).ok());
  store.end_turn("a", 7, Tokens{6}, true, t0);
  store.end_turn("a", 8, Tokens{9}, true, t0);
  EXPECT_EQ(store.history("a", t0), (Tokens{5, 9}));
  auto idle = store.end("a");
  ASSERT_TRUE(idle.ok());
  EXPECT_EQ(*idle, nullptr) << "no turn running";
}

TEST(SessionStore, IdsAndConfigAreValidated) {
  SessionStore store(SessionConfig{});
  EXPECT_FALSE(begin(store, "", 1, {1}).ok());
  EXPECT_FALSE(begin(store, std::string(kMaxSessionIdBytes + 1, 'x'), 1, {1}).ok());
  EXPECT_TRUE(begin(store, std::string(kMaxSessionIdBytes, 'x'), 1, {1}).ok());
  SessionConfig c;
  EXPECT_TRUE(c.validate().ok());
  c.max_sessions = 0;
  EXPECT_NE(c.validate().message().find("sessions.max_sessions"), std::string::npos);
  c = SessionConfig{};
  c.max_total_tokens = 0;
  EXPECT_NE(c.validate().message().find("sessions.max_total_tokens"), std::string::npos);
  c = SessionConfig{};
  c.idle_ttl_seconds = -1;
  EXPECT_NE(c.validate().message().find("sessions.idle_ttl_seconds"), std::string::npos);
}

TEST(SessionStore, HistoriesRestoredAfterARestartKeepTheCaps) {
  SessionStore old_store(SessionConfig{});
  ASSERT_TRUE(begin(old_store, "a", 1, {10, 11}).ok());
  old_store.end_turn("a", 1, Tokens{20}, /*completed=*/true, t0);
  ASSERT_TRUE(begin(old_store, "b", 2, {30}).ok());
  old_store.end_turn("b", 2, Tokens{31, 32}, /*completed=*/true, t0);
  ASSERT_TRUE(begin(old_store, "c", 3, {40}).ok());  // running: its input is not history yet
  SessionHistories saved = old_store.histories(t0);
  std::sort(saved.begin(), saved.end());
  EXPECT_EQ(saved, (SessionHistories{{"a", {10, 11, 20}}, {"b", {30, 31, 32}}}));

  SessionConfig two_sessions;
  two_sessions.max_sessions = 2;
  SessionStore store(two_sessions);
  ASSERT_TRUE(begin(store, "b", 7, {99}).ok());  // open already: the saved "b" is skipped
  saved.push_back({"d", {50}});
  EXPECT_EQ(store.restore(saved, t0), 1) << "\"a\" fits, then the cap of two sessions";
  EXPECT_EQ(store.history("a", t0), (Tokens{10, 11, 20}));
  EXPECT_FALSE(store.history("d", t0).has_value());
  auto next = begin(store, "a", 8, {12});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, (Tokens{10, 11, 20, 12}));
}

}  // namespace
}  // namespace drift
