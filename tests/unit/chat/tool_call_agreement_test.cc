// The grammar that demands tool calls (tool_call_grammar.h) and the parser that reads them
// (tool_call_syntax.h) are made from one description of each syntax (tool_call_format.h). Here
// they are held against each other through llguidance itself, over a byte-level vocabulary: a
// reply written as each model family writes its calls is one the grammar lets a model write, byte
// by byte to its end, and the parser reads those calls back out of it; a reply in another shape
// is one the grammar stops.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../tokenizer/tiny_vocab.h"
#include "chat/tool_call_grammar.h"
#include "constrain/grammar_compiler.h"

namespace drift {
namespace {

const jinja::Json kTools = jinja::Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time"}}])");

struct Matcher {
  int32_t end = 0;
  Tokenizer tokenizer = build();
  std::unique_ptr<GrammarCompiler> compiler;

  Matcher() {
    Expected<std::unique_ptr<GrammarCompiler>> c = GrammarCompiler::create(tokenizer);
    EXPECT_TRUE(c.ok()) << c.error().message;
    compiler = std::move(*c);
  }
  Tokenizer build() {
    const test::TinyVocab vocab = test::byte_level_vocab_with_end(end);  // byte b is token b
    Expected<Tokenizer> t = test::load_tokenizer_with_eos(vocab, end);
    EXPECT_TRUE(t.ok()) << t.error().message;
    return std::move(*t);
  }

  // How many bytes of `reply` the grammar lets a model write (reply.size(): all of them), and
  // whether it may end there.
  struct Walk {
    size_t accepted = 0;
    bool may_end = false;
  };
  Walk walk(const std::string& grammar, std::string_view reply) {
    Expected<std::unique_ptr<TokenConstraint>> c = compiler->compile({GrammarKind::kLark, grammar});
    EXPECT_TRUE(c.ok()) << c.error().message << "\n" << grammar;
    Walk w;
    if (!c.ok()) return w;
    TokenConstraint& matcher = **c;
    for (char ch : reply) {
      if (!matcher.accept(uint8_t(ch)).ok()) return w;
      ++w.accepted;
    }
    w.may_end = matcher.complete() || matcher.accept(end).ok();
    return w;
  }
};

ToolCallGrammarRequest required(ToolCallSyntax syntax, bool parallel = true) {
  ToolCallGrammarRequest r;
  r.syntax = syntax;
  r.tools = &kTools;
  r.required = true;
  r.parallel_tool_calls = parallel;
  return r;
}

struct Written {
  ToolCallGrammarRequest request;
  std::string reply;
  std::vector<ParsedToolCall> calls;  // what the parser must read back
  std::string content;
};

TEST(ToolCallAgreement, WhatTheGrammarLetsAModelWriteIsWhatTheParserReads) {
  Matcher m;
  const ParsedToolCall weather{"get_weather", R"({"city":"Oslo"})"};
  const ParsedToolCall time{"get_time", "{}"};
  ToolCallGrammarRequest generic_auto = required(ToolCallSyntax::kGeneric);
  generic_auto.required = false;
  const std::vector<Written> cases = {
      {required(ToolCallSyntax::kHermes),
       "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}\n</tool_call>",
       {weather},
       ""},
      {required(ToolCallSyntax::kHermes),
       "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}\n</tool_call>\n"
       "<tool_call>\n{\"name\":\"get_time\",\"arguments\":{}}\n</tool_call>",
       {weather, time},
       ""},
      {required(ToolCallSyntax::kLlama3),
       "{\"name\":\"get_weather\",\"parameters\":{\"city\":\"Oslo\"}}",
       {weather},
       ""},
      {required(ToolCallSyntax::kGeneric),
       "{\"tool_call\":{\"name\":\"get_time\",\"arguments\":{}}}",
       {time},
       ""},
      {generic_auto, "{\"response\":\"It is sunny.\"}", {}, "It is sunny."},
  };
  for (const Written& w : cases) {
    std::optional<std::string> grammar = tool_call_grammar(w.request);
    ASSERT_TRUE(grammar) << w.reply;
    Matcher::Walk walked = m.walk(*grammar, w.reply);
    EXPECT_EQ(walked.accepted, w.reply.size())
        << "the grammar stops at byte " << walked.accepted << " of\n"
        << w.reply << "\n"
        << *grammar;
    EXPECT_TRUE(walked.may_end) << w.reply;
    ParsedReply parsed = parse_tool_calls(w.request.syntax, w.reply);
    ASSERT_EQ(parsed.tool_calls.size(), w.calls.size()) << w.reply;
    for (size_t i = 0; i < w.calls.size(); ++i) {
      EXPECT_EQ(parsed.tool_calls[i].name, w.calls[i].name);
      EXPECT_EQ(jinja::Json::parse(parsed.tool_calls[i].arguments),
                jinja::Json::parse(w.calls[i].arguments));
    }
    EXPECT_EQ(parsed.content, w.content);
  }
}

TEST(ToolCallAgreement, TheGrammarStopsWhatIsNotACallInTheSyntax) {
  Matcher m;
  struct Stopped {
    ToolCallGrammarRequest request;
    std::string reply;
    size_t stops_at;  // the first byte the grammar refuses
  };
  const std::vector<Stopped> cases = {
      // Text before the call, which the parser would keep as content: a demanded call has none.
      {required(ToolCallSyntax::kHermes), "Sure. <tool_call>", 0},
      // A second call when parallel calls are off.
      {required(ToolCallSyntax::kHermes, /*parallel=*/false),
       "<tool_call>\n{\"name\":\"get_time\",\"arguments\":{}}\n</tool_call>\n<", 59},
      // A function the tools do not have.
      {required(ToolCallSyntax::kGeneric), "{\"tool_call\":{\"name\":\"get_date", 26},
  };
  for (const Stopped& s : cases) {
    std::optional<std::string> grammar = tool_call_grammar(s.request);
    ASSERT_TRUE(grammar);
    EXPECT_EQ(m.walk(*grammar, s.reply).accepted, s.stops_at) << s.reply << "\n" << *grammar;
  }
}

}  // namespace
}  // namespace drift
