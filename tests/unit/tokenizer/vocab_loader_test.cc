// Loading a vocabulary from malformed metadata fails with a message naming what is wrong.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tiny_vocab.h"
#include "tokenizer/tokenizer.h"

namespace drift {
namespace {

using test::GgufBuilder;
using test::kControl;
using test::load_tokenizer;
using test::TinyVocab;

std::string load_error(const GgufBuilder& gguf) {
  const auto tok = load_tokenizer(gguf);
  if (tok.ok()) return "(loaded)";
  return tok.error().message;
}

GgufBuilder spm_base() {
  GgufBuilder b;
  b.add_string("tokenizer.ggml.model", "llama")
      .add_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"});
  return b;
}

TEST(VocabLoader, SpecialTokenIdOutsideTheVocabulary) {
  auto gguf = spm_base();
  gguf.add_uint32("tokenizer.ggml.bos_token_id", 4);
  EXPECT_EQ(load_error(gguf),
            "metadata 'tokenizer.ggml.bos_token_id' is 4, outside the vocabulary of 4 tokens");
  auto pad = spm_base();
  pad.add_uint32("tokenizer.ggml.padding_token_id", 1000000);
  EXPECT_EQ(load_error(pad),
            "metadata 'tokenizer.ggml.padding_token_id' is 1000000, outside the vocabulary of 4 "
            "tokens");
}

TEST(VocabLoader, NegativeSpecialTokenId) {
  auto gguf = spm_base();
  gguf.add_int32("tokenizer.ggml.eos_token_id", -1);
  EXPECT_NE(load_error(gguf).find("tokenizer.ggml.eos_token_id"), std::string::npos);
}

TEST(VocabLoader, ScoresOfAnotherLength) {
  auto gguf = spm_base();
  gguf.add_floats("tokenizer.ggml.scores", {0, 0, 0});
  EXPECT_EQ(load_error(gguf),
            "metadata 'tokenizer.ggml.scores' has 3 elements but the vocabulary has 4 tokens");
  auto longer = spm_base();
  longer.add_floats("tokenizer.ggml.scores", {0, 0, 0, 0, 0});
  EXPECT_EQ(load_error(longer),
            "metadata 'tokenizer.ggml.scores' has 5 elements but the vocabulary has 4 tokens");
}

TEST(VocabLoader, TokenTypesOfAnotherLengthOrValue) {
  auto gguf = spm_base();
  gguf.add_int32s("tokenizer.ggml.token_type", {1, 3, 3});
  EXPECT_EQ(load_error(gguf),
            "metadata 'tokenizer.ggml.token_type' has 3 elements but the vocabulary has 4 tokens");
  auto bad = spm_base();
  bad.add_int32s("tokenizer.ggml.token_type", {2, 3, 3, 9});
  EXPECT_EQ(load_error(bad),
            "metadata 'tokenizer.ggml.token_type': token 3 has type 9, expected 0..6");
}

TEST(VocabLoader, ArraysOfTheWrongType) {
  auto scores = spm_base();
  scores.add_strings("tokenizer.ggml.scores", {"a", "b", "c", "d"});
  EXPECT_EQ(load_error(scores),
            "metadata 'tokenizer.ggml.scores' is an array of string, expected float32 or int32");
  GgufBuilder tokens;
  tokens.add_string("tokenizer.ggml.model", "llama").add_int32s("tokenizer.ggml.tokens", {1, 2});
  EXPECT_EQ(load_error(tokens),
            "metadata 'tokenizer.ggml.tokens' is an array of int32, expected strings");
  auto flag = spm_base();
  flag.add_uint32("tokenizer.ggml.add_bos_token", 1);
  EXPECT_NE(load_error(flag).find("tokenizer.ggml.add_bos_token"), std::string::npos);
}

TEST(VocabLoader, MissingOrEmptyVocabulary) {
  GgufBuilder none;
  none.add_string("tokenizer.ggml.model", "llama");
  EXPECT_EQ(load_error(none), "missing metadata key 'tokenizer.ggml.tokens'");
  GgufBuilder empty;
  empty.add_string("tokenizer.ggml.model", "llama").add_strings("tokenizer.ggml.tokens", {});
  EXPECT_EQ(load_error(empty),
            "metadata 'tokenizer.ggml.tokens' is empty: the vocabulary has no tokens");
  GgufBuilder no_model;
  no_model.add_strings("tokenizer.ggml.tokens", {"a"});
  EXPECT_EQ(load_error(no_model), "missing metadata key 'tokenizer.ggml.model'");
}

TEST(VocabLoader, UnsupportedTokenizerModel) {
  GgufBuilder gguf;
  gguf.add_string("tokenizer.ggml.model", "bert").add_strings("tokenizer.ggml.tokens", {"a"});
  EXPECT_EQ(
      load_error(gguf),
      "unsupported tokenizer model 'bert' (tokenizer.ggml.model): expected 'llama' or 'gpt2'");
}

TEST(VocabLoader, UnknownPreTokenizer) {
  TinyVocab vocab("gpt2");
  vocab.set_pre("deepseek-v3");
  vocab.add("a");
  EXPECT_EQ(load_error(vocab.gguf()),
            "unsupported pre-tokenizer 'deepseek-v3' (tokenizer.ggml.pre)");
}

TEST(VocabLoader, ByteLevelBpeNeedsWellFormedMerges) {
  GgufBuilder missing;
  missing.add_string("tokenizer.ggml.model", "gpt2")
      .add_string("tokenizer.ggml.pre", "gpt-2")
      .add_strings("tokenizer.ggml.tokens", {"a", "b", "ab"});
  EXPECT_EQ(load_error(missing),
            "missing metadata key 'tokenizer.ggml.merges': byte-level BPE needs its merges");
  for (const std::string merge : {"ab", "a ", "", " "}) {
    TinyVocab vocab("gpt2");
    vocab.set_pre("gpt-2");
    vocab.add("a");
    vocab.add("b");
    vocab.add_merge("a b");
    vocab.add_merge(merge);
    EXPECT_EQ(load_error(vocab.gguf()), "metadata 'tokenizer.ggml.merges': merge 1 ('" + merge +
                                            "') is not two parts separated by a space");
  }
}

TEST(VocabLoader, DuplicateTokenTexts) {
  GgufBuilder gguf;
  gguf.add_string("tokenizer.ggml.model", "llama")
      .add_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "x", "y", "x"});
  EXPECT_EQ(load_error(gguf), "tokenizer.ggml.tokens: token 5 has the same text as token 3 ('x')");
}

TEST(VocabLoader, AddBosWithoutABosToken) {
  TinyVocab vocab("gpt2");
  vocab.set_pre("glm4");  // GLM-4 has no default BOS
  vocab.add("a");
  auto gguf = vocab.gguf();
  gguf.add_bool("tokenizer.ggml.add_bos_token", true);
  EXPECT_EQ(load_error(gguf),
            "tokenizer.ggml.add_bos_token is set but the vocabulary has no BOS token");
}

TEST(VocabLoader, DefaultIdsTooLargeForTheVocabularyAreDropped) {
  TinyVocab vocab("gpt2");  // byte-level BPE defaults BOS and EOS to id 11
  vocab.set_pre("gpt-2");
  vocab.add("a");
  const auto tok = load_tokenizer(vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_FALSE(tok->bos().has_value());
  EXPECT_FALSE(tok->eos().has_value());
  EXPECT_TRUE(tok->eog_tokens().empty());
}

TEST(VocabLoader, EmptyTokenTextsGetAPlaceholder) {
  GgufBuilder gguf;
  gguf.add_string("tokenizer.ggml.model", "llama")
      .add_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "", ""});
  const auto tok = load_tokenizer(gguf);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(*tok->token_text(3), "[EMPTY_3]");
  EXPECT_EQ(*tok->token_text(4), "[EMPTY_4]");
}

TEST(VocabLoader, TheTokenizerOutlivesTheFile) {
  // Everything the tokenizer needs is copied out of the GGUF mapping (checked under ASan).
  TinyVocab vocab("gpt2");
  vocab.set_pre("gpt-2");
  vocab.add("<|im_end|>", kControl);
  const int32_t a = vocab.add("a");
  const int32_t b = vocab.add("b");
  const int32_t ab = vocab.add("ab");
  vocab.add_merge("a b");
  const auto tok = load_tokenizer(vocab.gguf());  // the GGUF bytes are freed on return
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->encode("ab<|im_end|>ba"), (std::vector<int32_t>{ab, 0, b, a}));
  EXPECT_EQ(*tok->token_text(0), "<|im_end|>");
}

}  // namespace
}  // namespace drift
