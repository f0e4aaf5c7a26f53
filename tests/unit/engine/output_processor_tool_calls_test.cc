// The output processor reads a text tool-call syntax's calls (chat/tool_call_reply.h): content
// streams while a call's text is held back, the calls go on the finish event, and every token's
// event still goes out, in order, with its logprobs. Each test scripts the reply's exact pieces:
// token i decodes to pieces[i].
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/output_processor.h"

namespace drift {
namespace {

class PieceStream final : public TokenTextStream {
 public:
  explicit PieceStream(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  Expected<std::string> push(TokenId token) override { return pieces_.at(size_t(token)); }
  std::string finish() override { return {}; }

 private:
  std::vector<std::string> pieces_;
};

struct ReadReply {
  std::vector<TokenEvent> events;  // every event, the finish's last
  bool stopped = false;            // a stop string ended the reply
  std::string content() const {
    std::string text;
    for (const TokenEvent& e : events) text += e.text;
    return text;
  }
  const std::vector<ParsedToolCall>& calls() const { return events.back().tool_calls; }
};

ReadReply read_reply(const std::vector<std::string>& pieces, std::optional<ToolCallSyntax> syntax,
                     bool parallel = true, std::vector<std::string> stop = {}) {
  OutputProcessor::ReplyReading reading;
  reading.tool_call_syntax = syntax;
  reading.parallel_tool_calls = parallel;
  OutputProcessor processor(std::make_unique<PieceStream>(pieces), std::move(stop), reading);
  ReadReply run;
  for (size_t i = 0; i < pieces.size() && !run.stopped; ++i) {
    TokenLogprobs logprobs;
    logprobs.logprob = -float(i);
    Expected<bool> stopped = processor.push(TokenId(i), logprobs, false, run.events);
    EXPECT_TRUE(stopped.ok());
    run.stopped = stopped.ok() && *stopped;
  }
  processor.finish(run.events);
  return run;
}

std::vector<std::string> bytes_of(const std::string& text) {
  std::vector<std::string> pieces;
  for (char c : text) pieces.emplace_back(1, c);
  return pieces;
}

const std::string kParisCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
const std::string kOsloCall =
    "<tool_call>\n{\"name\": \"get_forecast\", \"arguments\": {\"city\": \"Oslo\", \"days\": "
    "3}}\n</tool_call>";

TEST(OutputProcessorToolCalls, ContentBeforeACallStreamsAndTheCallIsHeldBack) {
  ReadReply run =
      read_reply({"Let me check", " the weather.", " <tool", "_call>\n{\"name\": ",
                  "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
                 ToolCallSyntax::kHermes);
  ASSERT_EQ(run.events.size(), 5u);
  // The content went out with the tokens that wrote it; the space before the call, which the
  // reply's parse trims, and the call's text never did.
  EXPECT_EQ(run.events[0].text, "Let me check");
  EXPECT_EQ(run.events[1].text, " the weather.");
  for (size_t i = 2; i < 5; ++i) EXPECT_EQ(run.events[i].text, "") << i;
  EXPECT_EQ(run.content(), "Let me check the weather.");
  // Every token's event went out in order, with its logprobs, text or not.
  for (size_t i = 0; i < 5; ++i) {
    ASSERT_EQ(run.events[i].token, TokenId(i));
    ASSERT_TRUE(run.events[i].logprobs) << i;
    EXPECT_EQ(run.events[i].logprobs->logprob, -float(i));
  }
  ASSERT_EQ(run.calls().size(), 1u);
  EXPECT_EQ(run.calls()[0].name, "get_weather");
  EXPECT_EQ(run.calls()[0].arguments, "{\"city\":\"Paris\"}");
  for (size_t i = 0; i + 1 < run.events.size(); ++i) EXPECT_TRUE(run.events[i].tool_calls.empty());
}

TEST(OutputProcessorToolCalls, ACallSplitOverManyTokensIsReadWholeAndShowsNoText) {
  ReadReply run = read_reply(bytes_of(kParisCall), ToolCallSyntax::kHermes);
  ASSERT_EQ(run.events.size(), kParisCall.size());
  EXPECT_EQ(run.content(), "");
  ASSERT_EQ(run.calls().size(), 1u);
  EXPECT_EQ(run.calls()[0].name, "get_weather");
  EXPECT_EQ(run.calls()[0].arguments, "{\"city\":\"Paris\"}");
}

TEST(OutputProcessorToolCalls, TwoCallsInOrderOrTheFirstWhenNotParallel) {
  const std::vector<std::string> pieces = {"Checking both.\n", kParisCall, "\n", kOsloCall};
  ReadReply run = read_reply(pieces, ToolCallSyntax::kHermes);
  EXPECT_EQ(run.content(), "Checking both.");
  ASSERT_EQ(run.calls().size(), 2u);
  EXPECT_EQ(run.calls()[0].name, "get_weather");
  EXPECT_EQ(run.calls()[1].name, "get_forecast");
  EXPECT_EQ(run.calls()[1].arguments, "{\"city\":\"Oslo\",\"days\":3}");

  ReadReply first = read_reply(pieces, ToolCallSyntax::kHermes, /*parallel=*/false);
  ASSERT_EQ(first.calls().size(), 1u);
  EXPECT_EQ(first.calls()[0].name, "get_weather");
}

TEST(OutputProcessorToolCalls, AMalformedCallIsContentGivenWhole) {
  const std::string reply = "Sure. <tool_call>{\"name\": get_weather}</tool_call> done";
  ReadReply run = read_reply(bytes_of(reply), ToolCallSyntax::kHermes);
  EXPECT_TRUE(run.calls().empty());
  EXPECT_EQ(run.content(), reply);
  // What could not be a call streamed; the rest came at the end.
  EXPECT_EQ(run.events[3].text, "e");
  EXPECT_EQ(run.events[4].text, ".");
  EXPECT_EQ(run.events[5].text, "");
  EXPECT_EQ(run.events.back().text.substr(0, 2), " <");
}

TEST(OutputProcessorToolCalls, ContentWithoutACallStreamsWhole) {
  ReadReply run =
      read_reply({"The weather ", "is ", "fine. ", "<to", "day>"}, ToolCallSyntax::kHermes);
  EXPECT_TRUE(run.calls().empty());
  EXPECT_EQ(run.content(), "The weather is fine. <today>");
  // A space waits for the text after it; "<to" for what shows it is not "<tool_call>".
  EXPECT_EQ(run.events[0].text, "The weather");
  EXPECT_EQ(run.events[1].text, " is");
  EXPECT_EQ(run.events[2].text, " fine.");
  EXPECT_EQ(run.events[3].text, "");
  EXPECT_EQ(run.events[4].text, " <today>");
}

TEST(OutputProcessorToolCalls, WholeReplySyntaxesHoldTheReplyOnlyWhileItMayBeACall) {
  ReadReply llama =
      read_reply(bytes_of("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}"),
                 ToolCallSyntax::kLlama3);
  EXPECT_EQ(llama.content(), "");
  ASSERT_EQ(llama.calls().size(), 1u);
  EXPECT_EQ(llama.calls()[0].arguments, "{\"city\":\"Rome\"}");

  ReadReply text = read_reply({"Rome", " is sunny {today}"}, ToolCallSyntax::kLlama3);
  EXPECT_EQ(text.events[0].text, "Rome");
  EXPECT_EQ(text.events[1].text, " is sunny {today}");
  EXPECT_TRUE(text.calls().empty());

  ReadReply mistral = read_reply({"[TOOL_CALLS]", "[{\"name\": \"a\", \"arguments\": {}}, ",
                                  "{\"name\": \"b\", \"arguments\": {\"x\": 1}}]"},
                                 ToolCallSyntax::kMistral);
  EXPECT_EQ(mistral.content(), "");
  ASSERT_EQ(mistral.calls().size(), 2u);
  EXPECT_EQ(mistral.calls()[1].name, "b");

  ReadReply generic =
      read_reply(bytes_of("{\"response\": \"It is sunny.\"}"), ToolCallSyntax::kGeneric);
  EXPECT_EQ(generic.content(), "It is sunny.");
  EXPECT_TRUE(generic.calls().empty());
}

TEST(OutputProcessorToolCalls, StopStringsCutTheReplyBeforeItsCallsAreRead) {
  ReadReply run = read_reply({"Checking.", kParisCall, " END ", kOsloCall}, ToolCallSyntax::kHermes,
                             true, {"END"});
  EXPECT_TRUE(run.stopped);
  EXPECT_EQ(run.content(), "Checking.");
  ASSERT_EQ(run.calls().size(), 1u);
  EXPECT_EQ(run.calls()[0].name, "get_weather");
}

TEST(OutputProcessorToolCalls, WithoutASyntaxACallsTextIsContent) {
  ReadReply run = read_reply({"Checking. ", kParisCall}, std::nullopt);
  EXPECT_EQ(run.content(), "Checking. " + kParisCall);
  EXPECT_TRUE(run.calls().empty());
}

}  // namespace
}  // namespace drift
