// Which tool requests get a constraint, and that it names the functions the reply may call with
// their parameter schemas, in the syntax the model writes. (That the grammars compile and hold
// is checked through the server with the real matcher: tests/server/test_tools.py.)
#include "chat/tool_call_grammar.h"

#include <gtest/gtest.h>

namespace drift {
namespace {

using Json = jinja::Json;

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time"}}])");

ToolCallGrammarRequest request(ToolCallSyntax syntax, bool required) {
  ToolCallGrammarRequest r;
  r.syntax = syntax;
  r.tools = &kTools;
  r.required = required;
  return r;
}

TEST(ToolCallGrammar, AutoStaysFreeWhereTheModelMayAnswerInText) {
  EXPECT_FALSE(tool_call_grammar(request(ToolCallSyntax::kHermes, false)));
  EXPECT_FALSE(tool_call_grammar(request(ToolCallSyntax::kLlama3, false)));
  EXPECT_FALSE(tool_call_grammar(request(ToolCallSyntax::kMistral, true)));
  // The generic JSON reply is constrained either way: a call, or a response.
  auto generic = tool_call_grammar(request(ToolCallSyntax::kGeneric, false));
  ASSERT_TRUE(generic);
  EXPECT_NE(generic->find(R"("response":{"type":"string"})"), std::string::npos) << *generic;
  EXPECT_NE(generic->find(R"("tool_call")"), std::string::npos) << *generic;
}

TEST(ToolCallGrammar, RequiredCallsNameEachFunctionWithItsParameters) {
  auto hermes = tool_call_grammar(request(ToolCallSyntax::kHermes, true));
  ASSERT_TRUE(hermes);
  EXPECT_NE(hermes->find(R"("<tool_call>\n")"), std::string::npos) << *hermes;
  EXPECT_NE(hermes->find(R"(call ("\n" call){0,7})"), std::string::npos) << *hermes;
  EXPECT_NE(
      hermes->find(
          R"({"name":{"const":"get_weather"},"arguments":{"type":"object","properties":{"city")"),
      std::string::npos)
      << *hermes;
  EXPECT_NE(hermes->find(R"({"name":{"const":"get_time"},"arguments":{"type":"object"}})"),
            std::string::npos)
      << *hermes;
  auto llama = tool_call_grammar(request(ToolCallSyntax::kLlama3, true));
  ASSERT_TRUE(llama);
  EXPECT_NE(llama->find(R"("parameters":{"type":"object")"), std::string::npos) << *llama;
  auto generic = tool_call_grammar(request(ToolCallSyntax::kGeneric, true));
  ASSERT_TRUE(generic);
  EXPECT_EQ(generic->find("\"response\""), std::string::npos) << *generic;
}

TEST(ToolCallGrammar, ANamedFunctionAndNoParallelCallsNarrowIt) {
  ToolCallGrammarRequest r = request(ToolCallSyntax::kHermes, true);
  r.named_function = "get_time";
  r.parallel_tool_calls = false;
  auto g = tool_call_grammar(r);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->find("get_weather"), std::string::npos) << *g;
  EXPECT_NE(g->find("get_time"), std::string::npos) << *g;
  EXPECT_EQ(g->find("(\"\\n\" call)"), std::string::npos) << *g;
  EXPECT_TRUE(g->starts_with("start: call\n")) << *g;
}

}  // namespace
}  // namespace drift
