// A text-syntax reply read as it streams (chat/tool_call_reply.h): whatever the token
// boundaries, the content deltas and the calls are those of parse_tool_calls over the whole
// reply, but for the one documented exception.
#include "chat/tool_call_reply.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace drift {
namespace {

struct Streamed {
  std::string content;
  std::vector<ParsedToolCall> calls;
};

// `reply` fed `step` bytes at a time.
Streamed stream(ToolCallSyntax syntax, const std::string& reply, size_t step) {
  ToolCallReply reader(syntax);
  Streamed out;
  for (size_t at = 0; at < reply.size(); at += step)
    out.content += reader.push(reply.substr(at, step));
  out.content += reader.finish();
  out.calls = reader.tool_calls();
  return out;
}

TEST(ToolCallReply, StreamedAtAnyStepItGivesTheWholeReplysParse) {
  const std::vector<std::pair<ToolCallSyntax, std::string>> replies = {
      {ToolCallSyntax::kHermes,
       "Sure. <tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"},
      {ToolCallSyntax::kHermes,
       "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>\n"
       "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>"},
      {ToolCallSyntax::kHermes, "No call here,  just text with a <tag> and  spaces.  "},
      {ToolCallSyntax::kHermes, "Broken: <tool_call>{\"name\": }</tool_call> after"},
      {ToolCallSyntax::kHermes, "Cut short <tool_call>{\"name\": \"f\", \"argum"},
      {ToolCallSyntax::kLlama3, "{\"name\": \"f\", \"parameters\": {\"x\": \"y\"}}"},
      {ToolCallSyntax::kLlama3, "  plain {braces} text"},
      {ToolCallSyntax::kMistral, "[{\"name\": \"f\", \"arguments\": {}}]"},
      {ToolCallSyntax::kGeneric, "{\"response\": \"hello\"}"},
      {ToolCallSyntax::kGeneric, "{\"tool_call\": {\"name\": \"f\", \"arguments\": {}}}"},
  };
  for (const auto& [syntax, reply] : replies) {
    const ParsedReply whole = parse_tool_calls(syntax, reply);
    for (size_t step : {size_t(1), size_t(2), size_t(5), reply.size()}) {
      Streamed s = stream(syntax, reply, step);
      EXPECT_EQ(s.content, whole.content) << reply << " step " << step;
      ASSERT_EQ(s.calls.size(), whole.tool_calls.size()) << reply << " step " << step;
      for (size_t i = 0; i < s.calls.size(); ++i) {
        EXPECT_EQ(s.calls[i].name, whole.tool_calls[i].name);
        EXPECT_EQ(s.calls[i].arguments, whole.tool_calls[i].arguments);
      }
    }
  }
}

TEST(ToolCallReply, ContentStreamsUntilACallMayStart) {
  ToolCallReply reader(ToolCallSyntax::kHermes);
  EXPECT_EQ(reader.push("Let me "), "Let me");  // the space waits for what follows it
  EXPECT_EQ(reader.push("look. <tool"), " look.");
  EXPECT_EQ(reader.push("_call>{\"name\": \"f\"}</tool_call>"), "");
  EXPECT_EQ(reader.finish(), "");
  ASSERT_EQ(reader.tool_calls().size(), 1u);
  EXPECT_EQ(reader.tool_calls()[0].arguments, "{}");
}

// The exception: leading whitespace went out with the text after it before a call showed that
// the parse trims it; the rest of the content is then the parse of what was held back.
TEST(ToolCallReply, LeadingWhitespaceBeforeTextAndACallIsStreamed) {
  const std::string reply = "\n Hi. <tool_call>{\"name\": \"f\"}</tool_call> bye";
  Streamed s = stream(ToolCallSyntax::kHermes, reply, 1);
  EXPECT_EQ(parse_tool_calls(ToolCallSyntax::kHermes, reply).content, "Hi.  bye");
  EXPECT_EQ(s.content, "\n Hi.bye");
  ASSERT_EQ(s.calls.size(), 1u);
}

}  // namespace
}  // namespace drift
