// SentencePiece-style BPE on tiny vocabularies: pieces chosen by score, byte fallback, the space
// prefix and U+2581 escaping, and llama.cpp's leading-space rule when decoding.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tiny_vocab.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace drift {
namespace {

using test::kControl;
using test::kUnknown;
using test::load_tokenizer;
using test::TinyVocab;
using Ids = std::vector<int32_t>;

constexpr std::string_view kSpace = "\xE2\x96\x81";  // ▁

std::string sp(std::string_view text) {  // spaces written as ▁
  std::string out;
  for (const char c : text) {
    if (c == ' ') {
      out += kSpace;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// <unk>=0, <s>=1, </s>=2 (llama.cpp's SentencePiece defaults), byte tokens 3..258, then pieces.
struct SentencePieceFixture {
  TinyVocab vocab{"llama"};
  int32_t byte0;

  SentencePieceFixture() {
    vocab.add("<unk>", kUnknown);
    vocab.add("<s>", kControl);
    vocab.add("</s>", kControl);
    byte0 = vocab.add_byte_tokens();
  }
  int32_t byte(uint8_t b) const { return byte0 + b; }
};

TEST(SentencePiece, PiecesWithTheBestScoresWin) {
  for (const bool bc_better : {true, false}) {
    SentencePieceFixture f;
    const int32_t a = f.vocab.add("a", test::kNormal, -10);
    const int32_t c = f.vocab.add("c", test::kNormal, -10);
    f.vocab.add("b", test::kNormal, -10);
    const int32_t ab = f.vocab.add("ab", test::kNormal, bc_better ? -2.0f : -1.0f);
    const int32_t bc = f.vocab.add("bc", test::kNormal, bc_better ? -1.0f : -2.0f);
    auto gguf = f.vocab.gguf();
    gguf.add_bool("tokenizer.ggml.add_space_prefix", false);
    const auto tok = load_tokenizer(gguf);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    EXPECT_EQ(tok->encode("abc", {.add_special = false}), bc_better ? (Ids{a, bc}) : (Ids{ab, c}));
  }
}

TEST(SentencePiece, EqualScoresJoinTheLeftmostPairFirst) {
  SentencePieceFixture f;
  f.vocab.add("a", test::kNormal, -10);
  f.vocab.add("b", test::kNormal, -10);
  const int32_t c = f.vocab.add("c", test::kNormal, -10);
  const int32_t ab = f.vocab.add("ab", test::kNormal, -1);
  f.vocab.add("bc", test::kNormal, -1);
  auto gguf = f.vocab.gguf();
  gguf.add_bool("tokenizer.ggml.add_space_prefix", false);
  const auto tok = load_tokenizer(gguf);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->encode("abc", {.add_special = false}), (Ids{ab, c}));
}

TEST(SentencePiece, SpacesBecomeU2581AndTextGetsASpacePrefix) {
  SentencePieceFixture f;
  f.vocab.add(std::string(kSpace), test::kNormal, -10);
  for (const char c : std::string("helo")) f.vocab.add(std::string(1, c), test::kNormal, -10);
  f.vocab.add("ll", test::kNormal, -1);
  f.vocab.add("llo", test::kNormal, -1.5);
  f.vocab.add("he", test::kNormal, -2);
  f.vocab.add(sp(" he"), test::kNormal, -3);
  const int32_t hello = f.vocab.add(sp(" hello"), test::kNormal, -0.5);
  const auto tok = load_tokenizer(f.vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_TRUE(tok->add_space_prefix());
  EXPECT_TRUE(tok->add_bos());  // SentencePiece's default
  EXPECT_EQ(tok->encode("hello"), (Ids{1, hello}));
  EXPECT_EQ(tok->encode("hello hello", {.add_special = false}), (Ids{hello, hello}));
}

TEST(SentencePiece, MissingCharactersFallBackToByteTokens) {
  SentencePieceFixture f;
  const int32_t space = f.vocab.add(std::string(kSpace), test::kNormal, -10);
  const auto tok = load_tokenizer(f.vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->encode("é", {.add_special = false}), (Ids{space, f.byte(0xC3), f.byte(0xA9)}));
  // Invalid UTF-8 keeps its bytes.
  EXPECT_EQ(tok->encode("\xFF", {.add_special = false}), (Ids{space, f.byte(0xFF)}));
  EXPECT_EQ(*tok->decode(Ids{f.byte(0xC3), f.byte(0xA9)}), "é");
}

TEST(SentencePiece, WithoutByteTokensMissingCharactersBecomeUnknown) {
  TinyVocab vocab("llama");
  vocab.add("<unk>", kUnknown);
  vocab.add("<s>", kControl);
  vocab.add("</s>", kControl);
  const int32_t a = vocab.add("a");
  auto gguf = vocab.gguf();
  gguf.add_bool("tokenizer.ggml.add_space_prefix", false);
  const auto tok = load_tokenizer(gguf);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->encode("az", {.add_special = false}), (Ids{a, 0}));
}

TEST(SentencePiece, TextAfterASpecialTokenGetsItsOwnSpacePrefix) {
  SentencePieceFixture f;
  const int32_t a = f.vocab.add(sp(" a"), test::kNormal, -1);
  const auto tok = load_tokenizer(f.vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->encode("a</s>a", {.add_special = false}), (Ids{a, 2, a}));
  // Unparsed, "</s>" is ordinary text inside one fragment: a single space prefix.
  const Ids plain = tok->encode("a</s>a", {.add_special = false, .parse_special = false});
  EXPECT_EQ(plain.front(), a);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), a), 1);
}

TEST(SentencePiece, DecodeRemovesTheSpacePrefixLikeLlamaCpp) {
  SentencePieceFixture f;
  const int32_t hello = f.vocab.add(sp(" hello"), test::kNormal, -1);
  const int32_t world = f.vocab.add(sp(" world"), test::kNormal, -1);
  const auto tok = load_tokenizer(f.vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(*tok->decode(Ids{hello, world}), "hello world");
  // llama.cpp strips the space from the first token only: after a BOS it is kept, and removing
  // the BOS keeps it too.
  EXPECT_EQ(*tok->decode(Ids{1, hello, world}), " hello world");
  EXPECT_EQ(*tok->decode(Ids{1, hello, world}, {.remove_special = true}), " hello world");
  EXPECT_EQ(*tok->decode(Ids{1, hello}, {.render_special = true}), "<s> hello");

  auto gguf = f.vocab.gguf();
  gguf.add_bool("tokenizer.ggml.add_space_prefix", false);
  const auto no_prefix = load_tokenizer(gguf);
  ASSERT_TRUE(no_prefix.ok());
  EXPECT_EQ(*no_prefix->decode(Ids{hello, world}), " hello world");
  EXPECT_EQ(no_prefix->encode("hello", {.add_special = false}).front(), f.byte('h'));
}

TEST(SentencePiece, StreamingMatchesDecodeIncludingTheFirstSpace) {
  SentencePieceFixture f;
  const int32_t hello = f.vocab.add(sp(" hello"), test::kNormal, -1);
  const auto tok = load_tokenizer(f.vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  // " hello" then 🙂 as four byte-fallback tokens.
  const Ids ids = {hello, f.byte(0xF0), f.byte(0x9F), f.byte(0x99), f.byte(0x82), hello};
  for (const DecodeOptions options : {DecodeOptions{}, DecodeOptions{.remove_special = true}}) {
    StreamingDecoder decoder(*tok, options);
    std::vector<std::string> deltas;
    for (const int32_t id : ids) deltas.push_back(*decoder.push(id));
    deltas.push_back(decoder.finish());
    EXPECT_EQ(deltas, (std::vector<std::string>{"hello", "", "", "", "🙂", " hello", ""}));
  }
}

}  // namespace
}  // namespace drift
