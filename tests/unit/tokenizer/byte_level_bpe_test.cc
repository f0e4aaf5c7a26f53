// Byte-level BPE on tiny vocabularies: merge order by rank, the byte-level alphabet, special-token
// parsing, BOS/EOS, decoding and the end-of-generation set, each as llama.cpp behaves.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tiny_vocab.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace drift {
namespace {

using test::byte_level;
using test::kControl;
using test::kUserDefined;
using test::load_tokenizer;
using test::TinyVocab;
using Ids = std::vector<int32_t>;

// ids 0..255 are the bytes; specials and merged tokens follow.
struct ByteLevelFixture {
  TinyVocab vocab{"gpt2"};
  int32_t endoftext, im_start, im_end;

  explicit ByteLevelFixture(std::string pre = "gpt-2") {
    vocab.set_pre(std::move(pre));
    vocab.add_byte_level_alphabet();
    endoftext = vocab.add("<|endoftext|>", kControl);
    im_start = vocab.add("<|im_start|>", kControl);
    im_end = vocab.add("<|im_end|>", kControl);
  }
};

Ids bytes_of(std::string_view text) {
  Ids ids;
  for (const char c : text) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

TEST(ByteLevelBpe, TheLowestRankedMergeGoesFirst) {
  for (const bool bc_first : {true, false}) {
    ByteLevelFixture f;
    const int32_t ab = f.vocab.add("ab");
    const int32_t bc = f.vocab.add("bc");
    if (bc_first) {
      f.vocab.add_merge("b c");
      f.vocab.add_merge("a b");
    } else {
      f.vocab.add_merge("a b");
      f.vocab.add_merge("b c");
    }
    const auto tok = load_tokenizer(f.vocab.gguf());
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    EXPECT_EQ(tok->encode("abc"), bc_first ? (Ids{'a', bc}) : (Ids{ab, 'c'}));
  }
}

TEST(ByteLevelBpe, MergesChainWithinAWordAndSpacesAreByteLevelCharacters) {
  ByteLevelFixture f;
  const int32_t ab = f.vocab.add("ab");
  const int32_t space_ab = f.vocab.add(byte_level(" ab"));  // "Ġab"
  f.vocab.add_merge("a b");
  f.vocab.add_merge(byte_level(" ") + " ab");
  const auto tok = load_tokenizer(f.vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->encode("ab ab"), (Ids{ab, space_ab}));
  // Words never merge across the pre-tokenizer's boundaries: "b" and "a" here are separate words.
  EXPECT_EQ(tok->encode("b.a"), (Ids{'b', '.', 'a'}));
}

TEST(ByteLevelBpe, MultiByteCharactersAreSpelledInByteTokens) {
  ByteLevelFixture f;
  const auto tok = load_tokenizer(f.vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->encode("é中"), (Ids{0xC3, 0xA9, 0xE4, 0xB8, 0xAD}));
  // Invalid UTF-8 is read as U+FFFD (EF BF BD), one per bad byte.
  EXPECT_EQ(tok->encode("a\xFF"), (Ids{'a', 0xEF, 0xBF, 0xBD}));
  EXPECT_EQ(*tok->decode(Ids{0xC3, 0xA9, 0xE4, 0xB8, 0xAD}), "é中");
}

TEST(ByteLevelBpe, BytesMissingFromTheVocabularyAreDropped) {
  TinyVocab vocab("gpt2");
  vocab.set_pre("gpt-2");
  const int32_t a = vocab.add("a");
  const int32_t b = vocab.add("b");
  const auto tok = load_tokenizer(vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->encode("azb"), (Ids{a, b}));  // as llama.cpp: no <unk> for byte-level BPE
}

TEST(ByteLevelBpe, IgnoreMergesEmitsAWordThatIsAToken) {
  // llama3 pre-tokenizers take a whole-word token even when no merge path leads to it.
  ByteLevelFixture f("llama-bpe");
  const int32_t abc = f.vocab.add("abc");
  const auto tok = load_tokenizer(f.vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->encode("abc", {.add_special = false}), (Ids{abc}));
  ByteLevelFixture g("gpt-2");
  g.vocab.add("abc");
  const auto merging = load_tokenizer(g.vocab.gguf());
  ASSERT_TRUE(merging.ok());
  EXPECT_EQ(merging->encode("abc"), (Ids{'a', 'b', 'c'}));
}

TEST(ByteLevelBpe, SpecialTokenTextIsParsedOnlyWhenAsked) {
  ByteLevelFixture f;
  const auto tok = load_tokenizer(f.vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const std::string text = "<|im_start|>hi<|im_end|>";
  EXPECT_EQ(tok->encode(text), (Ids{f.im_start, 'h', 'i', f.im_end}));
  EXPECT_EQ(tok->encode(text, {.parse_special = false}), bytes_of(text));
}

TEST(ByteLevelBpe, UserDefinedTokensAreMatchedEvenWithoutParsing) {
  ByteLevelFixture f;
  const int32_t tag = f.vocab.add("<tag>", kUserDefined);
  const auto tok = load_tokenizer(f.vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->encode("a<tag>b", {.parse_special = false}), (Ids{'a', tag, 'b'}));
  // User-defined tokens are rendered even when special tokens are not.
  EXPECT_EQ(*tok->decode(Ids{'a', tag, 'b'}), "a<tag>b");
}

TEST(ByteLevelBpe, LongerSpecialTokensAreFoundFirstWhereverTheyAre) {
  // llama.cpp cuts the text at each special token in turn, longest first, so "yzw" wins over an
  // earlier-starting "xy" that overlaps it.
  ByteLevelFixture f;
  const int32_t xy = f.vocab.add("xy", kControl);
  const int32_t yzw = f.vocab.add("yzw", kControl);
  const auto tok = load_tokenizer(f.vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->encode("xyzw"), (Ids{'x', yzw}));
  EXPECT_EQ(tok->encode("xyxyzw"), (Ids{xy, 'x', yzw}));
}

TEST(ByteLevelBpe, BosAndEosFollowTheMetadata) {
  ByteLevelFixture f;
  auto gguf = f.vocab.gguf();
  gguf.add_uint32("tokenizer.ggml.bos_token_id", f.im_start)
      .add_uint32("tokenizer.ggml.eos_token_id", f.im_end)
      .add_bool("tokenizer.ggml.add_bos_token", true)
      .add_bool("tokenizer.ggml.add_eos_token", true);
  const auto tok = load_tokenizer(gguf);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->encode("a"), (Ids{f.im_start, 'a', f.im_end}));
  EXPECT_EQ(tok->encode(""), (Ids{f.im_start, f.im_end}));
  EXPECT_EQ(tok->encode("a", {.add_special = false}), (Ids{'a'}));
  EXPECT_EQ(*tok->decode(Ids{f.im_start, 'a', f.im_end}, {.remove_special = true}), "a");
  EXPECT_EQ(*tok->decode(Ids{f.im_start, 'a', f.im_end}, {.render_special = true}),
            "<|im_start|>a<|im_end|>");
}

TEST(ByteLevelBpe, Gpt2DefaultsToId11ForBosLikeLlamaCpp) {
  ByteLevelFixture f;
  const auto tok = load_tokenizer(f.vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->bos(), 11);
  EXPECT_EQ(tok->eos(), 11);
  EXPECT_FALSE(tok->add_bos());
  EXPECT_EQ(tok->encode("a"), (Ids{'a'}));
}

TEST(ByteLevelBpe, DecodeCleansSpacesWhereThePreTokenizerSaysSo) {
  const std::string text = "Hello , world . It 's ok ' quoted '";
  ByteLevelFixture gpt2("gpt-2");
  const auto cleaning = load_tokenizer(gpt2.vocab.gguf());
  ASSERT_TRUE(cleaning.ok());
  EXPECT_TRUE(cleaning->clean_spaces());
  EXPECT_EQ(*cleaning->decode(cleaning->encode(text)), "Hello, world. It's ok'quoted '");
  ByteLevelFixture smollm("smollm");
  const auto keeping = load_tokenizer(smollm.vocab.gguf());
  ASSERT_TRUE(keeping.ok());
  EXPECT_FALSE(keeping->clean_spaces());
  EXPECT_EQ(*keeping->decode(keeping->encode(text)), text);
}

TEST(ByteLevelBpe, DecodeRejectsIdsOutsideTheVocabulary) {
  ByteLevelFixture f;
  const auto tok = load_tokenizer(f.vocab.gguf());
  ASSERT_TRUE(tok.ok());
  const auto decoded = tok->decode(Ids{'a', 5000});
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.error().message, "token id 5000 is outside the vocabulary of 259 tokens");
  EXPECT_FALSE(tok->token_to_piece(-1, true).ok());
  EXPECT_FALSE(tok->is_control(-1));
  EXPECT_FALSE(tok->is_eog(5000));
}

TEST(ByteLevelBpe, StreamingWaitsForTheLastByteOfACharacter) {
  ByteLevelFixture f("smollm");  // no space clean-up, which would hold text back too
  const auto tok = load_tokenizer(f.vocab.gguf());
  ASSERT_TRUE(tok.ok());
  StreamingDecoder decoder(*tok);
  EXPECT_EQ(*decoder.push('a'), "a");
  EXPECT_EQ(*decoder.push(0xF0), "");
  EXPECT_EQ(*decoder.push(0x9F), "");
  EXPECT_EQ(*decoder.push(0x99), "");
  EXPECT_EQ(*decoder.push(0x82), "🙂");
  EXPECT_EQ(*decoder.push(0xE4), "");
  EXPECT_EQ(decoder.finish(), "\xE4");  // a character that never completed comes out as is
  EXPECT_FALSE(decoder.push(9999).ok());
}

}  // namespace
}  // namespace drift
