// Grammars compiled by llguidance over a tiny byte-level vocabulary (every byte a token, a few
// merged tokens, an end-of-text control token): the masks allow exactly the tokens that keep the
// output in the grammar's language, the matcher completes when the output does, and bad grammars
// come back as errors that say what is wrong.
#include "constrain/grammar_compiler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "../tokenizer/tiny_vocab.h"

namespace drift {
namespace {

using test::TinyVocab;

struct Fixture {
  int32_t end = 0, digits12 = 0, yes = 0;
  Tokenizer tokenizer = build();
  std::unique_ptr<GrammarCompiler> compiler;

  Fixture() {
    Expected<std::unique_ptr<GrammarCompiler>> c = GrammarCompiler::create(tokenizer);
    EXPECT_TRUE(c.ok()) << c.error().message;
    compiler = std::move(*c);
  }

  Tokenizer build() {
    TinyVocab vocab = test::byte_level_vocab_with_end(end);  // byte b is token b
    digits12 = vocab.add("12");
    yes = vocab.add("yes");
    vocab.add("ye");
    vocab.add_merge("1 2");
    vocab.add_merge("y e");
    vocab.add_merge("ye s");
    Expected<Tokenizer> t = test::load_tokenizer_with_eos(vocab, end);
    EXPECT_TRUE(t.ok()) << t.error().message;
    return std::move(*t);
  }

  std::set<int32_t> allowed(TokenConstraint& c) {
    std::vector<uint32_t> mask(static_cast<size_t>(token_mask_words(tokenizer.vocab_size())));
    Status s = c.fill_mask(mask);
    EXPECT_TRUE(s.ok()) << s.message();
    std::set<int32_t> out;
    for (int32_t t = 0; t < tokenizer.vocab_size(); ++t)
      if ((mask[size_t(t / 32)] >> (t % 32)) & 1u) out.insert(t);
    return out;
  }

  std::unique_ptr<TokenConstraint> compile(GrammarKind kind, std::string source) {
    Expected<std::unique_ptr<TokenConstraint>> c = compiler->compile({kind, std::move(source)});
    EXPECT_TRUE(c.ok()) << c.error().message;
    return c.ok() ? std::move(*c) : nullptr;
  }
};

std::set<int32_t> bytes(std::string_view chars) {
  std::set<int32_t> out;
  for (char c : chars) out.insert(uint8_t(c));
  return out;
}

TEST(GrammarCompiler, RegexMaskAllowsExactlyTheContinuations) {
  Fixture f;
  EXPECT_EQ(f.compiler->end_token(), f.end);
  auto c = f.compile(GrammarKind::kRegex, "[0-2]{3}");
  ASSERT_TRUE(c);
  std::set<int32_t> first = bytes("012");
  first.insert(f.digits12);  // "12" fits as the first two of three digits
  EXPECT_EQ(f.allowed(*c), first);
  ASSERT_TRUE(c->accept(f.digits12).ok());
  EXPECT_FALSE(c->complete());
  EXPECT_EQ(f.allowed(*c), bytes("012"));  // one digit left: "12" would overshoot
  EXPECT_FALSE(c->accept('7').ok());       // outside the grammar
}

TEST(GrammarCompiler, CompleteOutputAllowsOnlyTheEndToken) {
  Fixture f;
  auto c = f.compile(GrammarKind::kRegex, "[0-2]{3}");
  ASSERT_TRUE(c);
  for (char d : std::string("201")) ASSERT_TRUE(c->accept(uint8_t(d)).ok());
  EXPECT_TRUE(c->complete());
  EXPECT_EQ(f.allowed(*c), std::set<int32_t>{f.end});
}

TEST(GrammarCompiler, LarkChoiceAndJsonSchema) {
  Fixture f;
  auto choice = f.compile(GrammarKind::kLark, "start: \"yes\" | \"no\"\n");
  ASSERT_TRUE(choice);
  std::set<int32_t> first = bytes("yn");
  first.insert(f.yes);
  first.insert(f.yes + 1);  // "ye"
  EXPECT_EQ(f.allowed(*choice), first);
  ASSERT_TRUE(choice->accept(f.yes).ok());
  EXPECT_TRUE(choice->complete());

  auto schema =
      f.compile(GrammarKind::kJsonSchema, R"({"type":"object","properties":{"a":{"enum":[1,2]}},)"
                                          R"("required":["a"],"additionalProperties":false})");
  ASSERT_TRUE(schema);
  // On one line, json.dumps's layout: {"a": 1}.
  for (char ch : std::string(R"({"a": )")) ASSERT_TRUE(schema->accept(uint8_t(ch)).ok()) << ch;
  std::set<int32_t> value = f.allowed(*schema);
  EXPECT_TRUE(value.contains('1') && value.contains('2') && value.contains(f.digits12) == false);
  EXPECT_FALSE(value.contains('3'));
}

TEST(GrammarCompiler, JsonIsOnOneLineUnlessTheSchemaSetsTheLayout) {
  Fixture f;
  auto object = f.compile(GrammarKind::kJsonObject, "");
  ASSERT_TRUE(object);
  ASSERT_TRUE(object->accept('{').ok());
  EXPECT_EQ(f.allowed(*object), bytes("\"}"));  // no whitespace run inside the object
  auto flexible = f.compile(GrammarKind::kJsonSchema,
                            R"({"type":"object","x-guidance":{"whitespace_flexible":true}})");
  ASSERT_TRUE(flexible);
  ASSERT_TRUE(flexible->accept('{').ok());
  EXPECT_TRUE(f.allowed(*flexible).contains('\n'));
}

TEST(GrammarCompiler, BadGrammarsAreErrorsThatSayWhy) {
  Fixture f;
  auto error = [&](GrammarKind kind, std::string source) {
    Expected<std::unique_ptr<TokenConstraint>> c = f.compiler->compile({kind, std::move(source)});
    return c.ok() ? std::string() : c.error().message;
  };
  EXPECT_NE(error(GrammarKind::kJsonSchema, R"({"type":"nonsense"})").find("nonsense"),
            std::string::npos);
  EXPECT_NE(error(GrammarKind::kJsonSchema, R"({"$ref":"#/nowhere"})").find("nowhere"),
            std::string::npos);
  EXPECT_NE(error(GrammarKind::kJsonSchema, "not json").find("invalid json_schema"),
            std::string::npos);
  EXPECT_NE(error(GrammarKind::kRegex, "((").find("invalid regex"), std::string::npos);
  EXPECT_NE(error(GrammarKind::kLark, "start: undefined_rule").find("invalid lark"),
            std::string::npos);
  EXPECT_NE(error(GrammarKind::kRegex, std::string("a\0b", 3)).find("NUL"), std::string::npos);
  EXPECT_NE(error(GrammarKind::kLark, std::string(kMaxGrammarSourceBytes + 1, 'x')).find("at most"),
            std::string::npos);
}

// Grammars that parse but that no output can follow: once they failed at the first step's mask,
// as the engine's error (a 500); now compiling refuses them, naming why.
TEST(GrammarCompiler, GrammarsNoOutputCanFollowAreRefusedWhenCompiled) {
  Fixture f;
  auto error = [&](GrammarKind kind, std::string source) {
    Expected<std::unique_ptr<TokenConstraint>> c = f.compiler->compile({kind, std::move(source)});
    return c.ok() ? std::string("compiled") : c.error().message;
  };
  std::string alternatives = "start: ";
  for (int i = 0; i < 6000; ++i) alternatives += i ? " | x" : "x";
  alternatives += "\nx: \"y\"";
  const std::pair<GrammarKind, std::string> cases[] = {
      {GrammarKind::kJsonSchema, R"({"$ref": "#"})"},
      {GrammarKind::kJsonSchema,
       R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})"},
      {GrammarKind::kLark, "start: a\na: b\nb: a\n"},
      {GrammarKind::kRegex, "[^\\x00-\\x{10FFFF}]"},
      {GrammarKind::kLark, alternatives + "\n"},
  };
  for (const auto& [kind, source] : cases) {
    const std::string message = error(kind, source);
    EXPECT_EQ(message.rfind(fmt::format("invalid {}: ", grammar_kind_name(kind)), 0), 0u)
        << source.substr(0, 80) << " -> " << message;
  }
}

// (a{1000}){1000} compiles in microseconds, then building its lexer states takes seconds: the
// first mask is computed at compile time within the budget, and the grammar refused past it (by
// its CPU time, or by the wall-clock ceiling when the machine is busy enough to starve it).
TEST(GrammarCompiler, ACostlyRegexIsRefusedWithinTheBudget) {
  Fixture f;
  const auto started = std::chrono::steady_clock::now();
  Expected<std::unique_ptr<TokenConstraint>> c =
      f.compiler->compile({GrammarKind::kRegex, "(a{1000}){1000}"});
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("too costly"), std::string::npos) << c.error().message;
  EXPECT_LT(took, GrammarLimits{}.first_masks.wall + std::chrono::seconds(1));
}

TEST(GrammarCompiler, ASchemaNestedPastTheJsonLimitIsRefused) {
  Fixture f;
  std::string deep;
  for (int i = 0; i < 2000; ++i) deep += R"({"type":"array","items":)";
  deep += R"({"type":"integer"})" + std::string(2000, '}');
  Expected<std::unique_ptr<TokenConstraint>> c =
      f.compiler->compile({GrammarKind::kJsonSchema, deep});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("deeper than 64"), std::string::npos) << c.error().message;
}

TEST(GrammarCompiler, MatchersAreIndependent) {
  Fixture f;
  auto a = f.compile(GrammarKind::kRegex, "[0-2]{3}");
  auto b = f.compile(GrammarKind::kRegex, "[0-2]{3}");
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->accept('1').ok());
  ASSERT_TRUE(a->accept('1').ok());
  EXPECT_EQ(f.allowed(*b).size(), 4u);  // b is still at the start
  EXPECT_EQ(f.allowed(*a), bytes("012"));
}

}  // namespace
}  // namespace drift
