// StreamingDecoder: pushing tokens one at a time yields exactly Tokenizer::decode, never splits a
// character, and holds back only what later tokens can still change.
#include "tokenizer/streaming_decoder.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tiny_vocab.h"
#include "util/utf8.h"

namespace drift {
namespace {

using test::kControl;
using test::load_tokenizer;
using test::TinyVocab;
using Ids = std::vector<int32_t>;

// Byte-level vocabulary without merges: one token per byte, plus BOS/EOS added by the model.
Tokenizer byte_tokenizer(std::string pre) {
  TinyVocab vocab("gpt2");
  vocab.set_pre(std::move(pre));
  vocab.add_byte_level_alphabet();
  vocab.add("<s>", kControl);   // 256
  vocab.add("</s>", kControl);  // 257
  auto gguf = vocab.gguf();
  gguf.add_uint32("tokenizer.ggml.bos_token_id", 256)
      .add_uint32("tokenizer.ggml.eos_token_id", 257)
      .add_bool("tokenizer.ggml.add_bos_token", true)
      .add_bool("tokenizer.ggml.add_eos_token", true);
  auto tok = load_tokenizer(gguf);
  EXPECT_TRUE(tok.ok()) << tok.error().message;
  return std::move(*tok);
}

std::vector<std::string> stream(const Tokenizer& tok, const Ids& ids, DecodeOptions options) {
  StreamingDecoder decoder(tok, options);
  std::vector<std::string> deltas;
  for (const int32_t id : ids) deltas.push_back(*decoder.push(id));
  deltas.push_back(decoder.finish());
  return deltas;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += p;
  return out;
}

TEST(StreamingDecoder, EqualsDecodeOnRandomTextWithSpaceCleanUp) {
  std::mt19937 rng(5);
  const std::vector<std::string> alphabet = {" ", "'", ".", ",", "?", "s",  "m",    "r",
                                             "e", "v", "t", "x", "é", "中", "🙂", "\n"};
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  std::uniform_int_distribution<size_t> length(0, 20);
  for (const char* pre : {"gpt-2", "smollm"}) {
    const Tokenizer tok = byte_tokenizer(pre);
    for (int i = 0; i < 3000; ++i) {
      std::string text;
      for (size_t n = length(rng); n > 0; --n) text += alphabet[pick(rng)];
      const Ids ids = tok.encode(text);
      for (const DecodeOptions options : {DecodeOptions{}, DecodeOptions{.render_special = true},
                                          DecodeOptions{.remove_special = true}}) {
        const auto deltas = stream(tok, ids, options);
        for (const std::string& d : deltas) ASSERT_TRUE(is_valid_utf8(d)) << text;
        ASSERT_EQ(join(deltas), *tok.decode(ids, options)) << pre << " \"" << text << '"';
      }
    }
  }
}

TEST(StreamingDecoder, HoldsASpaceUntilItsFateIsKnown) {
  const Tokenizer tok = byte_tokenizer("gpt-2");
  const Ids ids = tok.encode("ab c .", {.add_special = false});
  EXPECT_EQ(stream(tok, ids, {}), (std::vector<std::string>{"", "ab", "", "", "", "", " c."}));
  // Without clean-up every byte is final at once.
  const Tokenizer raw = byte_tokenizer("smollm");
  EXPECT_EQ(stream(raw, ids, {}), (std::vector<std::string>{"a", "b", " ", "c", " ", ".", ""}));
}

TEST(StreamingDecoder, RemovesBosAndATrailingEosOnly) {
  const Tokenizer tok = byte_tokenizer("smollm");
  const DecodeOptions remove{.remove_special = true};
  const DecodeOptions render_and_remove{.render_special = true, .remove_special = true};
  EXPECT_EQ(join(stream(tok, {256, 'a', 257}, render_and_remove)), "a");
  // An EOS that is followed by more text is kept.
  EXPECT_EQ(join(stream(tok, {256, 'a', 257, 'b'}, render_and_remove)), "a</s>b");
  EXPECT_EQ(join(stream(tok, {'a', 256}, render_and_remove)), "a<s>");
  EXPECT_EQ(join(stream(tok, {256, 'a', 257}, remove)), "a");
}

TEST(StreamingDecoder, FinishStartsANewSequence) {
  const Tokenizer tok = byte_tokenizer("smollm");
  StreamingDecoder decoder(tok, {.render_special = true, .remove_special = true});
  EXPECT_EQ(*decoder.push(256), "");
  EXPECT_EQ(*decoder.push(0xC3), "");
  EXPECT_EQ(decoder.finish(), "\xC3");
  EXPECT_EQ(*decoder.push(256), "");  // a leading BOS again
  EXPECT_EQ(*decoder.push('z'), "z");
  EXPECT_EQ(decoder.finish(), "");
}

TEST(StreamingDecoder, RejectsUnknownIdsWithoutLosingState) {
  const Tokenizer tok = byte_tokenizer("smollm");
  StreamingDecoder decoder(tok);
  EXPECT_EQ(*decoder.push(0xE4), "");
  const auto bad = decoder.push(-3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "token id -3 is outside the vocabulary of 258 tokens");
  EXPECT_EQ(*decoder.push(0xB8), "");
  EXPECT_EQ(*decoder.push(0xAD), "中");
}

}  // namespace
}  // namespace drift
