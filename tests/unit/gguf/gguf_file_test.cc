// GGUF reader: a valid file reads back exactly, and every malformed file of the corpus
// (scripts/fixtures/make_gguf_corpus.py) is rejected with the message naming its defect.
#include "gguf/gguf_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

namespace drift {
namespace {

const std::filesystem::path kGgufData = std::filesystem::path(DRIFT_TEST_DATA_DIR) / "gguf";

std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TEST(GgufFile, ReadsValidFileMetadata) {
  auto file = GgufFile::open((kGgufData / "valid" / "small.gguf").string());
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_EQ(file->metadata().size(), 6u);
  EXPECT_EQ(*file->get_string("general.architecture"), "llama");
  EXPECT_EQ(*file->get_uint("llama.block_count"), 2u);
  EXPECT_FLOAT_EQ(static_cast<float>(*file->get_float("llama.rope.freq_base")), 10000.0f);
  EXPECT_TRUE(*file->get_bool("general.flag"));
  auto tokens = file->get_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ((*tokens)->strings.size(), 3u);
  EXPECT_EQ((*tokens)->strings[2], "<s>");
  auto scores = file->get_array("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.ok());
  EXPECT_EQ((*scores)->float_at(1), -1.0);
}

TEST(GgufFile, TypedLookupsNameTheKey) {
  auto file = GgufFile::open((kGgufData / "valid" / "small.gguf").string());
  ASSERT_TRUE(file.ok());
  auto missing = file->get_uint("llama.context_length");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "missing metadata key 'llama.context_length'");
  auto wrong = file->get_uint("general.architecture");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().message,
            "metadata 'general.architecture' has type string, expected an integer");
}

TEST(GgufFile, ReadsValidFileTensors) {
  auto file = GgufFile::open((kGgufData / "valid" / "small.gguf").string());
  ASSERT_TRUE(file.ok()) << file.error().message;
  ASSERT_EQ(file->tensors().size(), 2u);
  const GgufTensor* embd = file->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, GgmlType::kF32);
  EXPECT_EQ(embd->n_dims, 2u);
  EXPECT_EQ(embd->ne[0], 4u);
  EXPECT_EQ(embd->ne[1], 3u);
  EXPECT_EQ(embd->n_bytes, 48u);
  float values[12];
  std::memcpy(values, embd->data, sizeof(values));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(values[i], static_cast<float>(i));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(embd->data) % 32, 0u);

  const GgufTensor* w = file->find_tensor("blk.0.w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->type, GgmlType::kQ8_0);
  EXPECT_EQ(w->n_bytes, 68u);
  EXPECT_EQ(w->offset, 64u);
  EXPECT_EQ(w->data[2 + 5], 5);  // first block: 2-byte scale then quants 0..31
  EXPECT_EQ(file->find_tensor("nope"), nullptr);
}

TEST(GgufFile, ReadsVersion2WithoutTensors) {
  auto file = GgufFile::open((kGgufData / "valid" / "empty_v2.gguf").string());
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(file->version(), 2u);
  EXPECT_TRUE(file->tensors().empty());
}

TEST(GgufFile, MissingFileIsAnError) {
  auto file = GgufFile::open("/nonexistent/model.gguf");
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.error().message.find("cannot open '/nonexistent/model.gguf'"), std::string::npos);
}

TEST(GgufFile, RejectsEveryMalformedFileWithItsOwnMessage) {
  std::ifstream manifest(kGgufData / "malformed" / "expected.json");
  ASSERT_TRUE(manifest.good());
  nlohmann::json expected = nlohmann::json::parse(manifest);
  ASSERT_GE(expected.size(), 30u);
  std::set<std::string> messages;
  for (const auto& [name, fragment] : expected.items()) {
    SCOPED_TRACE(name);
    // Parse from an exact-size heap copy so that ASan catches any read past the end.
    std::vector<uint8_t> bytes = read_bytes(kGgufData / "malformed" / (name + ".gguf"));
    auto owned = std::make_unique<uint8_t[]>(bytes.size());
    if (!bytes.empty()) std::memcpy(owned.get(), bytes.data(), bytes.size());
    auto file = GgufFile::parse(MappedFile::borrow(owned.get(), bytes.size()));
    ASSERT_FALSE(file.ok()) << name << " was accepted";
    const std::string& message = file.error().message;
    EXPECT_NE(message.find(fragment.get<std::string>()), std::string::npos)
        << "message was: " << message;
    EXPECT_TRUE(messages.insert(message).second) << "message repeats: " << message;
  }
}

TEST(GgufFile, EveryTruncationOfAValidFileIsRejected) {
  std::vector<uint8_t> bytes = read_bytes(kGgufData / "valid" / "small.gguf");
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto owned = std::make_unique<uint8_t[]>(n + 1);
    std::memcpy(owned.get(), bytes.data(), n);
    auto file = GgufFile::parse(MappedFile::borrow(owned.get(), n));
    EXPECT_FALSE(file.ok()) << "accepted a file cut to " << n << " of " << bytes.size() << " bytes";
  }
}

}  // namespace
}  // namespace drift
