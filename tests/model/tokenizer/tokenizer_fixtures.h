// Reading the tokenizer fixtures (tests/data/tokenizer, made by
// scripts/fixtures/make_tokenizer_fixtures.py): shared by the model tokenizer tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

namespace drift::test {

inline const std::filesystem::path kTokenizerData =
    std::filesystem::path(DRIFT_TEST_DATA_DIR) / "tokenizer";

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A fixture text: a JSON string, or {"hex": ...} for bytes that are not UTF-8.
inline std::string text_of(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  const std::string hex = value.at("hex").get<std::string>();
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

}  // namespace drift::test
