// The tokenizers of the two reference models against llama.cpp: token ids for every corpus case
// (special-token parsing on and off, with and without BOS), decoded text, the vocabulary's special
// tokens, and streaming decoding. Expected values come from
// scripts/fixtures/make_tokenizer_fixtures.py (llama-tokenize and llama_detokenize at the commit
// recorded in each fixture).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "test_models.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_fixtures.h"
#include "util/utf8.h"

namespace drift {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using test::kTokenizerData;
using test::read_file;
using test::text_of;

std::string describe(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out + "]";
}

struct ModelCase {
  std::string_view model_file;
  std::string fixture_file;
};

class LlamaCppParity : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    const fs::path model = test::model_path(GetParam().model_file);
    ASSERT_TRUE(test::model_available(model));
    auto file = GgufFile::open(model.string());
    ASSERT_TRUE(file.ok()) << file.error().message;
    auto tokenizer = Tokenizer::from_gguf(*file);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
    tokenizer_.emplace(std::move(*tokenizer));
    fixture_ = json::parse(read_file(kTokenizerData / GetParam().fixture_file));
    ASSERT_EQ(fixture_.at("model").get<std::string>(), GetParam().model_file);
  }

  std::string corpus_text(const json& test_case) const {
    return read_file(kTokenizerData / "corpus" /
                     (test_case.at("name").get<std::string>() + ".txt"));
  }

  const Tokenizer& tokenizer() const { return *tokenizer_; }

  std::optional<Tokenizer> tokenizer_;
  json fixture_;
};

std::optional<int32_t> optional_id(const json& value) {
  if (value.is_null()) return std::nullopt;
  return value.get<int32_t>();
}

TEST_P(LlamaCppParity, SpecialTokensMatch) {
  const json& vocab = fixture_.at("vocab");
  EXPECT_EQ(tokenizer().vocab_size(), vocab.at("n_tokens").get<int32_t>());
  EXPECT_EQ(tokenizer().bos(), optional_id(vocab.at("bos")));
  EXPECT_EQ(tokenizer().eos(), optional_id(vocab.at("eos")));
  EXPECT_EQ(tokenizer().eot(), optional_id(vocab.at("eot")));
  EXPECT_EQ(tokenizer().pad(), optional_id(vocab.at("pad")));
  EXPECT_EQ(tokenizer().add_bos(), vocab.at("add_bos").get<bool>());
  EXPECT_EQ(tokenizer().add_eos(), vocab.at("add_eos").get<bool>());
  const auto eog = vocab.at("eog").get<std::vector<int32_t>>();
  EXPECT_EQ(std::vector<int32_t>(tokenizer().eog_tokens().begin(), tokenizer().eog_tokens().end()),
            eog);
  for (const int32_t id : eog) EXPECT_TRUE(tokenizer().is_eog(id)) << id;

  // Control flags of every token, given as runs [first id, is_control].
  const json& runs = vocab.at("control_runs");
  int mismatches = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    const int32_t first = runs[r].at(0).get<int32_t>();
    const int32_t end =
        r + 1 < runs.size() ? runs[r + 1].at(0).get<int32_t>() : tokenizer().vocab_size();
    const bool control = runs[r].at(1).get<bool>();
    for (int32_t id = first; id < end; ++id) {
      if (tokenizer().is_control(id) != control && ++mismatches <= 5) {
        ADD_FAILURE() << "token " << id << " is_control " << !control << ", llama.cpp says "
                      << control;
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_P(LlamaCppParity, TokenToPieceMatches) {
  for (const json& entry : fixture_.at("pieces")) {
    const int32_t id = entry.at(0).get<int32_t>();
    const auto plain = tokenizer().token_to_piece(id, false);
    const auto rendered = tokenizer().token_to_piece(id, true);
    ASSERT_TRUE(plain.ok() && rendered.ok()) << id;
    EXPECT_EQ(*plain, text_of(json{{"hex", entry.at(1)}})) << "token " << id;
    EXPECT_EQ(*rendered, text_of(json{{"hex", entry.at(2)}})) << "token " << id;
  }
}

TEST_P(LlamaCppParity, TokenIdsMatchForEveryCase) {
  for (const json& test_case : fixture_.at("cases")) {
    const std::string name = test_case.at("name").get<std::string>();
    const std::string text = corpus_text(test_case);
    for (const bool parse_special : {true, false}) {
      for (const bool add_special : {true, false}) {
        const std::string key =
            std::string(parse_special ? "special" : "plain") + (add_special ? "_bos" : "_nobos");
        const auto expected = test_case.at("ids").at(key).get<std::vector<int32_t>>();
        const std::vector<int32_t> ids =
            tokenizer().encode(text, {.add_special = add_special, .parse_special = parse_special});
        EXPECT_EQ(ids, expected) << name << " (" << key << ")\n  drift:     " << describe(ids)
                                 << "\n  llama.cpp: " << describe(expected);
      }
    }
  }
}

TEST_P(LlamaCppParity, DecodeMatchesForEveryCase) {
  for (const json& test_case : fixture_.at("cases")) {
    const std::string name = test_case.at("name").get<std::string>();
    for (const auto& [key, decoded] : test_case.at("decoded").items()) {
      const auto ids = test_case.at("ids").at(key).get<std::vector<int32_t>>();
      const auto plain = tokenizer().decode(ids, {});
      const auto rendered = tokenizer().decode(ids, {.render_special = true});
      const auto removed = tokenizer().decode(ids, {.remove_special = true});
      ASSERT_TRUE(plain.ok() && rendered.ok() && removed.ok()) << name;
      EXPECT_EQ(*plain, text_of(decoded.at("plain"))) << name << " " << key;
      EXPECT_EQ(*rendered, text_of(decoded.at("render_special"))) << name << " " << key;
      EXPECT_EQ(*removed, text_of(decoded.at("remove_special"))) << name << " " << key;
    }
  }
}

// With special tokens rendered and the BOS the encoder added removed, decoding gives back the
// input, except where the tokenizers themselves lose information: invalid UTF-8 becomes U+FFFD in
// byte-level BPE, and SentencePiece reads a literal U+2581 as a space.
TEST_P(LlamaCppParity, DecodeOfEncodeGivesTheText) {
  for (const json& test_case : fixture_.at("cases")) {
    const std::string name = test_case.at("name").get<std::string>();
    const std::string text = corpus_text(test_case);
    if (!is_valid_utf8(text) || text.find("\xE2\x96\x81") != std::string::npos) continue;
    const auto decoded = tokenizer().decode(tokenizer().encode(text),
                                            {.render_special = true, .remove_special = true});
    ASSERT_TRUE(decoded.ok());
    EXPECT_EQ(*decoded, text) << name;
  }
}

TEST_P(LlamaCppParity, StreamingDecodeEqualsDecodeAndKeepsCharactersWhole) {
  for (const json& test_case : fixture_.at("cases")) {
    const std::string name = test_case.at("name").get<std::string>();
    const auto ids = test_case.at("ids").at("special_bos").get<std::vector<int32_t>>();
    for (const DecodeOptions options :
         {DecodeOptions{}, DecodeOptions{.render_special = true, .remove_special = true}}) {
      const auto whole = tokenizer().decode(ids, options);
      ASSERT_TRUE(whole.ok());
      StreamingDecoder decoder(tokenizer(), options);
      std::string streamed;
      for (const int32_t id : ids) {
        const auto delta = decoder.push(id);
        ASSERT_TRUE(delta.ok());
        if (is_valid_utf8(*whole)) {
          EXPECT_TRUE(is_valid_utf8(*delta)) << name << " at " << id;
        }
        streamed += *delta;
      }
      streamed += decoder.finish();
      EXPECT_EQ(streamed, *whole) << name;
    }
  }
}

// Characters the vocabulary lacks are spelled in byte tokens (byte fallback in Gemma, byte-level
// characters in SmolLM2); streaming must hold their first bytes back until the character is whole.
TEST_P(LlamaCppParity, StreamingHoldsBackSplitCharacters) {
  const std::string text = "𓀀𓁐 ꙮ 𝔘𝔫𝔦";  // rare characters, split over several tokens
  const std::vector<int32_t> ids = tokenizer().encode(text, {.add_special = false});
  ASSERT_GT(ids.size(), 6u);
  StreamingDecoder decoder(tokenizer());
  std::string streamed;
  int empty_deltas = 0;
  for (const int32_t id : ids) {
    const auto delta = decoder.push(id);
    ASSERT_TRUE(delta.ok());
    EXPECT_TRUE(is_valid_utf8(*delta));
    empty_deltas += delta->empty();
    streamed += *delta;
  }
  streamed += decoder.finish();
  EXPECT_EQ(streamed, text);
  EXPECT_GT(empty_deltas, 0) << "no token ended inside a character: the test text is too common";
}

TEST_P(LlamaCppParity, EncodesEightKilobytesInMilliseconds) {
  std::string text;
  for (const json& test_case : fixture_.at("cases")) {
    if (test_case.at("name").get<std::string>().ends_with("large_mixed")) {
      text = corpus_text(test_case);
    }
  }
  ASSERT_GE(text.size(), 8000u);
  constexpr int kRuns = 10;
  const auto start = std::chrono::steady_clock::now();
  size_t n_tokens = 0;
  for (int i = 0; i < kRuns; ++i) n_tokens += tokenizer().encode(text).size();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
      kRuns;
  std::cout << "encode of " << text.size() << " bytes (" << n_tokens / kRuns << " tokens): " << ms
            << " ms\n";
  EXPECT_LT(ms, 50.0);
}

INSTANTIATE_TEST_SUITE_P(
    Models, LlamaCppParity,
    ::testing::Values(ModelCase{test::kSmolLm2File, "SmolLM2-135M-Instruct.Q4_1.json"},
                      ModelCase{test::kGemma3File, "gemma-3-270m-q4_k_m.json"}),
    [](const auto& info) {
      return std::string(info.param.model_file.substr(0, 6)) == "SmolLM" ? std::string("SmolLM2")
                                                                         : std::string("Gemma3");
    });

}  // namespace
}  // namespace drift
