// HarmonyParser against openai-harmony's StreamableParser (the reference parser of OpenAI's harmony
// library) on the same o200k_harmony token ids: the state after every token, the messages of
// whole replies and of replies cut after any token (tests/data/tokenizer/harmony_reference.json,
// scripts/fixtures/make_harmony_fixtures.py). Then what no reference covers: the same reply fed in
// other splits of its bytes, and the recoveries from malformed replies where openai-harmony fails.
#include "chat/harmony_parser.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace drift {
namespace {

using nlohmann::json;

const json& reference() {
  static const json data = [] {
    std::ifstream in(std::filesystem::path(DRIFT_TEST_DATA_DIR) / "tokenizer" /
                     "harmony_reference.json");
    EXPECT_TRUE(in.good());
    return json::parse(in);
  }();
  return data;
}

HarmonyTokens reference_markers() {
  const json& m = reference()["markers"];
  HarmonyTokens t;
  t.start = m["<|start|>"];
  t.end = m["<|end|>"];
  t.message = m["<|message|>"];
  t.channel = m["<|channel|>"];
  t.constrain = m["<|constrain|>"];
  t.return_ = m["<|return|>"];
  t.call = m["<|call|>"];
  return t;
}

std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += char(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

std::string or_empty(const json& v) { return v.is_null() ? std::string() : v.get<std::string>(); }

struct Reply {
  std::string name;
  std::vector<int32_t> tokens;
  std::vector<std::string> pieces;  // each token's bytes
  json steps;
  json messages;
};

std::vector<Reply> replies() {
  std::vector<Reply> out;
  for (const json& r : reference()["replies"]) {
    Reply reply{r["name"], r["tokens"].get<std::vector<int32_t>>(), {}, r["steps"], r["messages"]};
    for (const json& hex : r["pieces_hex"]) reply.pieces.push_back(unhex(hex));
    out.push_back(std::move(reply));
  }
  return out;
}

HarmonyParser::State state_named(const std::string& name) {
  if (name == "HEADER") return HarmonyParser::State::kHeader;
  if (name == "CONTENT") return HarmonyParser::State::kContent;
  return HarmonyParser::State::kExpectStart;
}

json as_json(const std::vector<HarmonyMessage>& messages) {
  json out = json::array();
  for (const HarmonyMessage& m : messages)
    out.push_back({{"role", m.role},
                   {"channel", m.channel},
                   {"recipient", m.recipient},
                   {"content_type", m.content_type},
                   {"content", m.content}});
  return out;
}

// openai-harmony's messages with null fields as drift's empty strings.
json expected_messages(const json& messages) {
  json out = json::array();
  for (const json& m : messages)
    out.push_back({{"role", m["role"]},
                   {"channel", or_empty(m["channel"])},
                   {"recipient", or_empty(m["recipient"])},
                   {"content_type", or_empty(m["content_type"])},
                   {"content", m["content"]}});
  return out;
}

TEST(HarmonyParser, FollowsOpenaiHarmonyTokenByToken) {
  const std::vector<Reply> all = replies();
  ASSERT_GE(all.size(), 9u);
  for (const Reply& r : all) {
    SCOPED_TRACE(r.name);
    HarmonyParser parser(reference_markers());
    std::string streamed;  // the current message's deltas
    for (size_t k = 0; k < r.tokens.size(); ++k) {
      SCOPED_TRACE("after token " + std::to_string(k));
      const size_t before = parser.messages().size();
      const std::string delta = parser.push(r.tokens[k], r.pieces[k]);
      if (parser.messages().size() != before) streamed.clear();
      streamed += delta;
      const json& step = r.steps[k];
      ASSERT_EQ(parser.state(), state_named(step["state"]));
      ASSERT_EQ(parser.messages().size(), step["messages"].get<size_t>());
      if (parser.state() != HarmonyParser::State::kContent) continue;
      EXPECT_EQ(parser.current().channel, or_empty(step["channel"]));
      EXPECT_EQ(parser.current().recipient, or_empty(step["recipient"]));
      EXPECT_EQ(parser.current().content_type, or_empty(step["content_type"]));
      EXPECT_EQ(streamed, parser.current().content) << "the deltas add up to the content";
      // openai-harmony releases text once every token it holds decodes; drift releases each
      // whole character at once, so it may be ahead of it, never behind or different.
      const std::string theirs = step["content"];
      EXPECT_TRUE(parser.current().content.starts_with(theirs))
          << parser.current().content << " vs " << theirs;
      if (!step["delta"].is_null()) EXPECT_EQ(parser.current().content, theirs);
    }
    parser.finish();
    EXPECT_EQ(as_json(parser.messages()), expected_messages(r.messages));
  }
}

// A reply cut after any token (max_tokens) keeps its completed messages and the one being read,
// as far as it got; openai-harmony refuses a reply cut in a header, drift drops that header.
TEST(HarmonyParser, ACutReplyKeepsWhatOpenaiHarmonyKeeps) {
  for (const Reply& r : replies()) {
    const json whole = expected_messages(r.messages);
    for (size_t cut = 1; cut <= r.tokens.size(); ++cut) {
      SCOPED_TRACE(r.name + " cut after " + std::to_string(cut) + " tokens");
      HarmonyParser parser(reference_markers());
      for (size_t k = 0; k < cut; ++k) parser.push(r.tokens[k], r.pieces[k]);
      parser.finish();
      const json& step = r.steps[cut - 1];
      json expected = json::array();
      for (size_t i = 0; i < step["messages"].get<size_t>(); ++i) expected.push_back(whole[i]);
      if (step["state"] == "CONTENT")
        expected.push_back({{"role", "assistant"},
                            {"channel", or_empty(step["channel"])},
                            {"recipient", or_empty(step["recipient"])},
                            {"content_type", or_empty(step["content_type"])},
                            {"content", step["content"]}});
      EXPECT_EQ(as_json(parser.messages()), expected);
    }
  }
}

// The parser reads ids for markers and text for the rest, so it must not matter how the text
// arrives: byte by byte (as byte-level tokens or the engine's held-back deltas give it), or a
// whole run of text between two markers at once.
TEST(HarmonyParser, HowTheTextIsSplitChangesNothing) {
  const HarmonyTokens markers = reference_markers();
  for (const Reply& r : replies()) {
    SCOPED_TRACE(r.name);
    HarmonyParser whole(markers);
    for (size_t k = 0; k < r.tokens.size(); ++k) whole.push(r.tokens[k], r.pieces[k]);
    whole.finish();

    HarmonyParser bytes(markers), runs(markers);
    std::string run;
    int32_t run_token = 0;
    for (size_t k = 0; k < r.tokens.size(); ++k) {
      const int32_t t = r.tokens[k];
      if (markers.is_marker(t)) {
        bytes.push(t, r.pieces[k]);
        if (!run.empty()) runs.push(run_token, std::exchange(run, {}));
        runs.push(t, r.pieces[k]);
        continue;
      }
      for (char c : r.pieces[k]) bytes.push(t, std::string(1, c));
      run += r.pieces[k];
      run_token = t;
    }
    if (!run.empty()) runs.push(run_token, run);
    bytes.finish();
    runs.finish();
    EXPECT_EQ(as_json(bytes.messages()), as_json(whole.messages()));
    EXPECT_EQ(as_json(runs.messages()), as_json(whole.messages()));
  }
}

// ---- malformed replies: openai-harmony fails on each; drift keeps what it can read --------------

class HarmonyRecovery : public ::testing::Test {
 protected:
  static constexpr int32_t kText = 1000;  // any ordinary token

  std::vector<HarmonyMessage> parse(std::vector<std::pair<int32_t, std::string>> reply) {
    HarmonyParser parser(markers_);
    for (const auto& [token, text] : reply) parser.push(token, text);
    parser.finish();
    return parser.messages();
  }
  std::pair<int32_t, std::string> text(std::string s) { return {kText, std::move(s)}; }
  std::pair<int32_t, std::string> mark(int32_t id) { return {id, "<|marker text is not read|>"}; }

  HarmonyTokens markers_ = reference_markers();
};

TEST_F(HarmonyRecovery, StrayTextBetweenMessagesIsDropped) {
  const HarmonyTokens& m = markers_;
  auto got = parse({mark(m.channel), text("final"), mark(m.message), text("a"), mark(m.end),
                    text("stray"), mark(m.start), text("assistant"), mark(m.channel), text("final"),
                    mark(m.message), text("b"), mark(m.return_)});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].content, "a");
  EXPECT_EQ(got[1].content, "b");
  EXPECT_EQ(got[1].role, "assistant");
}

TEST_F(HarmonyRecovery, AChannelWithoutStartOpensAnAssistantMessage) {
  const HarmonyTokens& m = markers_;
  auto got = parse({mark(m.channel), text("analysis"), mark(m.message), text("think"), mark(m.end),
                    mark(m.channel), text("final"), mark(m.message), text("done")});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].role, "assistant");
  EXPECT_EQ(got[1].channel, "final");
  EXPECT_EQ(got[1].content, "done");
}

TEST_F(HarmonyRecovery, MarkersInsideContentNeverBecomeText) {
  const HarmonyTokens& m = markers_;
  // <|message|> and <|constrain|> are dropped; <|start|> ends the message the model did not end.
  auto got = parse({mark(m.channel), text("analysis"), mark(m.message), text("x"), mark(m.message),
                    mark(m.constrain), text("y"), mark(m.start), text("assistant"), mark(m.channel),
                    text("final"), mark(m.message), text("z"), mark(m.return_)});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].channel, "analysis");
  EXPECT_EQ(got[0].content, "xy");
  EXPECT_EQ(got[1].channel, "final");
  EXPECT_EQ(got[1].content, "z");
}

TEST_F(HarmonyRecovery, InvalidUtf8BecomesReplacementCharacters) {
  const HarmonyTokens& m = markers_;
  auto got = parse({mark(m.channel), text("final"), mark(m.message), text("a\xFF"), text("b\xE2"),
                    text("\x82\xAC"), text("\xF0\x9F"), mark(m.return_)});
  ASSERT_EQ(got.size(), 1u);
  // The euro sign's bytes arrive over two pushes and make one character; the emoji never ends
  // and is dropped with the message, as openai-harmony drops undecoded tokens.
  EXPECT_EQ(got[0].content,
            "a\xEF\xBF\xBD"
            "b\xE2\x82\xAC");
}

TEST_F(HarmonyRecovery, AnUnreadableHeaderKeepsWhatItCanRead) {
  const HarmonyTokens& m = markers_;
  // An unknown role without a recipient, and words left over: openai-harmony refuses both.
  auto got =
      parse({mark(m.start), text("narrator"), mark(m.channel), text("final"), mark(m.message),
             text("once"), mark(m.end), mark(m.start), text("assistant extra words"),
             mark(m.channel), text("final"), mark(m.message), text("twice"), mark(m.return_)});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].role, "narrator");
  EXPECT_EQ(got[0].content, "once");
  EXPECT_EQ(got[1].role, "assistant");
  EXPECT_EQ(got[1].channel, "final");
  EXPECT_EQ(got[1].content, "twice");
}

TEST_F(HarmonyRecovery, AnEndMarkerInAHeaderDropsTheMessage) {
  const HarmonyTokens& m = markers_;
  auto got =
      parse({mark(m.channel), text("analysis"), mark(m.end), mark(m.start), text("assistant"),
             mark(m.channel), text("final"), mark(m.message), text("ok"), mark(m.return_)});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].content, "ok");
}

TEST_F(HarmonyRecovery, TextSpellingAMarkerInAHeaderIsNotOne) {
  const HarmonyTokens& m = markers_;
  // "<|channel|>" written as text is no channel: the header's words are the role and recipient.
  auto got = parse({text("<|channel|>final"), mark(m.message), text("hi"), mark(m.return_)});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].channel, "");
  EXPECT_EQ(got[0].recipient, "<|channel|>final");
}

}  // namespace
}  // namespace drift
