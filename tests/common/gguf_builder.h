// Writes GGUF files in memory for tests: a few metadata keys, no tensors. Tests build tiny
// vocabularies (or a model's sampling recommendation) with it and parse them back with
// GgufFile::parse, so every load path runs without a model file.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.h"
#include "util/mapped_file.h"

namespace drift::test {

class GgufBuilder {
 public:
  GgufBuilder& add_string(std::string_view key, std::string_view value) {
    add_key(key, GgufType::kString);
    put_string(value);
    return *this;
  }
  GgufBuilder& add_bool(std::string_view key, bool value) {
    add_key(key, GgufType::kBool);
    bytes_.push_back(value ? 1 : 0);
    return *this;
  }
  GgufBuilder& add_uint32(std::string_view key, uint32_t value) {
    add_key(key, GgufType::kUint32);
    put(value);
    return *this;
  }
  GgufBuilder& add_int32(std::string_view key, int32_t value) {
    add_key(key, GgufType::kInt32);
    put(value);
    return *this;
  }
  GgufBuilder& add_float32(std::string_view key, float value) {
    add_key(key, GgufType::kFloat32);
    put(value);
    return *this;
  }
  GgufBuilder& add_strings(std::string_view key, const std::vector<std::string>& values) {
    add_array_header(key, GgufType::kString, values.size());
    for (const std::string& v : values) put_string(v);
    return *this;
  }
  GgufBuilder& add_floats(std::string_view key, const std::vector<float>& values) {
    add_array_header(key, GgufType::kFloat32, values.size());
    for (const float v : values) put(v);
    return *this;
  }
  GgufBuilder& add_int32s(std::string_view key, const std::vector<int32_t>& values) {
    add_array_header(key, GgufType::kInt32, values.size());
    for (const int32_t v : values) put(v);
    return *this;
  }

  // The file: header (version 3, no tensors), then the key-value pairs in the order added.
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out = {'G', 'G', 'U', 'F'};
    append(out, uint32_t{3});
    append(out, uint64_t{0});
    append(out, n_keys_);
    out.insert(out.end(), bytes_.begin(), bytes_.end());
    return out;
  }

 private:
  template <typename T>
  static void append(std::vector<uint8_t>& out, T value) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    out.insert(out.end(), raw, raw + sizeof(T));
  }
  template <typename T>
  void put(T value) {
    append(bytes_, value);
  }
  void put_string(std::string_view s) {
    put(uint64_t{s.size()});
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void add_key(std::string_view key, GgufType type) {
    ++n_keys_;
    put_string(key);
    put(static_cast<uint32_t>(type));
  }
  void add_array_header(std::string_view key, GgufType element_type, size_t count) {
    add_key(key, GgufType::kArray);
    put(static_cast<uint32_t>(element_type));
    put(uint64_t{count});
  }

  std::vector<uint8_t> bytes_;
  uint64_t n_keys_ = 0;
};

// A parsed GgufFile together with the bytes it borrows.
struct OwnedGguf {
  std::unique_ptr<std::vector<uint8_t>> bytes;
  GgufFile file;
};

inline Expected<OwnedGguf> parse_gguf(const GgufBuilder& builder) {
  auto bytes = std::make_unique<std::vector<uint8_t>>(builder.bytes());
  DRIFT_ASSIGN_OR_RETURN(GgufFile file,
                         GgufFile::parse(MappedFile::borrow(bytes->data(), bytes->size())));
  return OwnedGguf{std::move(bytes), std::move(file)};
}

}  // namespace drift::test
