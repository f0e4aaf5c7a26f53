// gpt-oss's pre-tokenizer (tokenizer.ggml.pre = "gpt-4o") against llama-tokenize on 300 varied
// strings, through a byte-level vocabulary whose merges cross every place where pre-tokenizers
// split differently (scripts/fixtures/make_o200k_pretokenizer_fixture.py): a word boundary drawn
// in the wrong place changes the ids (under llama-bpe's pre-tokenizer 144 of the 300 differ).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace drift {
namespace {

const std::string kData = std::string(DRIFT_TEST_DATA_DIR) + "/tokenizer/";

TEST(O200kPreTokenizer, IdsMatchLlamaTokenizeOnVariedStrings) {
  auto file = GgufFile::open(kData + "o200k-vocab.gguf");
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto tokenizer = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  EXPECT_EQ(tokenizer->pre_tokenizer(), "gpt-4o");
  std::ifstream in(kData + "o200k_pretokenizer.json");
  const nlohmann::json fixture = nlohmann::json::parse(in);
  int checked = 0;
  for (const nlohmann::json& c : fixture.at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tokenizer->encode(text, {.add_special = false, .parse_special = false}), ids)
        << "\"" << text << "\"";
    ++checked;
  }
  EXPECT_EQ(checked, 300);
}

}  // namespace
}  // namespace drift
