// SmolLM2's vocabulary under the other pre-tokenizers drift supports (llama3, qwen2, gpt-2,
// default, starcoder, gpt-4o: gpt-oss's o200k): the model file's metadata with tokenizer.ggml.pre
// replaced, tokenized and decoded as llama.cpp does with the same replacement (fixtures
// <model>.pre-<name>.json from scripts/fixtures/make_tokenizer_fixtures.py). This covers the word
// splitters, ignore_merges and the space clean-up of families for which no small reference model is
// at hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "test_models.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_fixtures.h"
#include "util/mapped_file.h"

namespace drift {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using test::kTokenizerData;
using test::read_file;
using test::text_of;

template <typename T>
void put(std::vector<uint8_t>& out, T value) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));
  out.insert(out.end(), raw, raw + sizeof(T));
}

// The model's header and metadata with the value of tokenizer.ggml.pre replaced and the tensor
// count set to 0 (the tensor descriptions that follow are then ignored).
std::vector<uint8_t> with_pre_tokenizer(const fs::path& model, std::string_view pre) {
  auto file = GgufFile::open(model.string());
  EXPECT_TRUE(file.ok());
  if (!file.ok()) return {};
  std::ifstream in(model, std::ios::binary);
  std::vector<uint8_t> head(file->data_offset());
  in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));

  std::vector<uint8_t> key;  // length-prefixed key and the string type
  const std::string_view name = "tokenizer.ggml.pre";
  put(key, uint64_t{name.size()});
  key.insert(key.end(), name.begin(), name.end());
  put(key, uint32_t{8});
  const auto at = std::search(head.begin(), head.end(), key.begin(), key.end());
  EXPECT_NE(at, head.end());
  if (at == head.end()) return {};
  const size_t value_at = static_cast<size_t>(at - head.begin()) + key.size();
  uint64_t old_size = 0;
  std::memcpy(&old_size, head.data() + value_at, sizeof(old_size));

  std::vector<uint8_t> out(head.begin(), head.begin() + static_cast<std::ptrdiff_t>(value_at));
  put(out, uint64_t{pre.size()});
  out.insert(out.end(), pre.begin(), pre.end());
  out.insert(out.end(), head.begin() + static_cast<std::ptrdiff_t>(value_at + 8 + old_size),
             head.end());
  const uint64_t no_tensors = 0;
  std::memcpy(out.data() + 8, &no_tensors, sizeof(no_tensors));
  return out;
}

class PreTokenizerVariants : public ::testing::TestWithParam<std::string> {};

TEST_P(PreTokenizerVariants, MatchLlamaCppOnTheCorpus) {
  const fs::path model = test::model_path(test::kSmolLm2File);
  ASSERT_TRUE(test::model_available(model));
  const std::vector<uint8_t> bytes = with_pre_tokenizer(model, GetParam());
  ASSERT_FALSE(bytes.empty());
  auto file = GgufFile::parse(MappedFile::borrow(bytes.data(), bytes.size()));
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto tokenizer = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  EXPECT_EQ(tokenizer->pre_tokenizer(), GetParam());

  const fs::path fixture_path =
      kTokenizerData / ("SmolLM2-135M-Instruct.Q4_1.pre-" + GetParam() + ".json");
  const json fixture = json::parse(read_file(fixture_path));
  ASSERT_EQ(fixture.at("pre").get<std::string>(), GetParam());
  for (const json& test_case : fixture.at("cases")) {
    const std::string name = test_case.at("name").get<std::string>();
    const std::string text = read_file(kTokenizerData / "corpus" / (name + ".txt"));
    const auto special = test_case.at("ids").at("special_bos").get<std::vector<int32_t>>();
    const auto plain = test_case.at("ids").at("plain_bos").get<std::vector<int32_t>>();
    EXPECT_EQ(tokenizer->encode(text), special) << name;
    EXPECT_EQ(tokenizer->encode(text, {.parse_special = false}), plain) << name;
    const json& decoded = test_case.at("decoded").at("special_bos");
    EXPECT_EQ(*tokenizer->decode(special), text_of(decoded.at("plain"))) << name;
    EXPECT_EQ(*tokenizer->decode(special, {.render_special = true}),
              text_of(decoded.at("render_special")))
        << name;
  }
}

INSTANTIATE_TEST_SUITE_P(SmolLM2Vocabulary, PreTokenizerVariants,
                         ::testing::Values("llama-bpe", "qwen2", "gpt-2", "default", "starcoder",
                                           "gpt-4o"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace drift
