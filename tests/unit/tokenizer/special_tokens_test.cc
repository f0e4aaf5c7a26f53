// Special tokens as llama.cpp completes them from token texts: EOT/EOM/FIM detection, the
// end-of-generation set, "unused" control tokens and the gpt-oss and Gemma 4 exceptions.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tiny_vocab.h"
#include "tokenizer/tokenizer.h"

namespace drift {
namespace {

using test::kControl;
using test::kNormal;
using test::load_tokenizer;
using test::TinyVocab;
using Ids = std::vector<int32_t>;

Ids eog_of(const Tokenizer& tok) { return Ids(tok.eog_tokens().begin(), tok.eog_tokens().end()); }

TEST(SpecialTokens, ChatMlEndTokensEndGeneration) {
  TinyVocab vocab("gpt2");
  vocab.set_pre("smollm");
  const int32_t endoftext = vocab.add("<|endoftext|>", kControl);
  vocab.add("<|im_start|>", kControl);
  const int32_t im_end = vocab.add("<|im_end|>", kControl);
  const int32_t reponame = vocab.add("<reponame>", kControl);
  vocab.add("a");
  auto gguf = vocab.gguf();
  gguf.add_uint32("tokenizer.ggml.bos_token_id", 1).add_uint32("tokenizer.ggml.eos_token_id", 2);
  const auto tok = load_tokenizer(gguf);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  // SmolLM2's set: "<|endoftext|>" and "<|im_end|>" by text, "<reponame>" as the FIM repo token.
  EXPECT_EQ(eog_of(*tok), (Ids{endoftext, im_end, reponame}));
  EXPECT_EQ(tok->eot(), endoftext);  // the lowest id among the EOT texts
  EXPECT_TRUE(tok->is_eog(im_end));
  EXPECT_FALSE(tok->is_eog(1));
}

TEST(SpecialTokens, EogTextsBecomeControlTokens) {
  TinyVocab vocab("llama");
  vocab.add("<unk>", test::kUnknown);
  vocab.add("<s>", kControl);
  vocab.add("</s>", kControl);
  const int32_t end_of_turn = vocab.add("<end_of_turn>", kNormal);  // mistyped as normal
  const int32_t eot_id = vocab.add("<|eot_id|>", kNormal);
  const auto tok = load_tokenizer(vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->eot(), end_of_turn);
  EXPECT_TRUE(tok->is_control(end_of_turn));
  EXPECT_TRUE(tok->is_control(eot_id));
  EXPECT_EQ(eog_of(*tok), (Ids{2, end_of_turn, eot_id}));
  // Now control tokens: not rendered unless asked, and parsed from text.
  EXPECT_EQ(*tok->decode(Ids{end_of_turn}), "");
  EXPECT_EQ(tok->encode("<end_of_turn>", {.add_special = false}), (Ids{end_of_turn}));
}

TEST(SpecialTokens, MetadataIdsComeFirst) {
  TinyVocab vocab("gpt2");
  vocab.set_pre("gpt-2");
  vocab.add("<|endoftext|>", kControl);
  const int32_t im_end = vocab.add("<|im_end|>", kControl);
  const int32_t eom = vocab.add("<|eom_id|>", kControl);
  auto gguf = vocab.gguf();
  gguf.add_uint32("tokenizer.ggml.eot_token_id", im_end);
  const auto tok = load_tokenizer(gguf);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->eot(), im_end);
  EXPECT_EQ(tok->eom(), eom);
  EXPECT_TRUE(tok->is_eog(eom));
}

TEST(SpecialTokens, QwenFimTokensEndGeneration) {
  TinyVocab vocab("gpt2");
  vocab.set_pre("qwen2");
  const int32_t endoftext = vocab.add("<|endoftext|>", kControl);
  vocab.add("<|fim_prefix|>", kControl);
  const int32_t fim_pad = vocab.add("<|fim_pad|>", kControl);
  const int32_t repo = vocab.add("<|repo_name|>", kControl);
  const int32_t file_sep = vocab.add("<|file_sep|>", kControl);
  const auto tok = load_tokenizer(vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(eog_of(*tok), (Ids{endoftext, fim_pad, repo, file_sep}));
}

TEST(SpecialTokens, GptOssEndOnlyEndsAMessage) {
  TinyVocab vocab("gpt2");
  vocab.set_pre("gpt-2");
  const int32_t ret = vocab.add("<|return|>", kControl);
  const int32_t call = vocab.add("<|call|>", kControl);
  const int32_t end = vocab.add("<|end|>", kControl);
  const int32_t channel = vocab.add("<|channel|>", kControl);
  const auto tok = load_tokenizer(vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(eog_of(*tok), (Ids{ret, call}));
  // "<|end|>" and "<|channel|>" become user-defined: always rendered.
  EXPECT_EQ(*tok->decode(Ids{channel, end}), "<|channel|><|end|>");
}

TEST(SpecialTokens, UnusedControlTokensStayControlTokens) {
  TinyVocab vocab("llama");
  vocab.add("<unk>", test::kUnknown);
  vocab.add("<s>", kControl);
  vocab.add("</s>", kControl);
  const int32_t unused = vocab.add("<unused0>", kControl);
  const auto tok = load_tokenizer(vocab.gguf());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_TRUE(tok->is_control(unused));
  EXPECT_FALSE(tok->is_eog(unused));
  EXPECT_EQ(tok->encode("<unused0>", {.add_special = false}), (Ids{unused}));
}

}  // namespace
}  // namespace drift
