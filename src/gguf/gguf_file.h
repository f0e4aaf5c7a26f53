// GGUF (versions 2 and 3) read from a memory-mapped file.
//
// Parsing validates every count, length, type, dimension, offset and size against the file before
// using it, with overflow-checked arithmetic; a malformed file yields an Error that names the
// offending field, never a crash or an allocation sized by an unchecked number. Strings and
// tensor data are views into the mapping, so a GgufFile must outlive anything taken from it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/ggml_type.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace drift {

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view gguf_type_name(GgufType type);

// An array value. Numeric elements stay in the file (unaligned, little-endian) and are read with
// the typed accessors; string elements are views into the file.
struct GgufArray {
  GgufType element_type = GgufType::kUint8;
  uint64_t count = 0;
  const uint8_t* raw = nullptr;           // numeric elements: count * element size bytes
  std::vector<std::string_view> strings;  // string elements

  bool is_integer() const;
  bool is_float() const;
  // Element i as a number; the caller checks the element type first.
  int64_t int_at(uint64_t i) const;
  double float_at(uint64_t i) const;
};

struct GgufValue {
  GgufType type = GgufType::kUint8;
  uint64_t u = 0;      // unsigned integer types and bool
  int64_t i = 0;       // signed integer types
  double f = 0;        // float types
  std::string_view s;  // string
  GgufArray array;     // array

  bool is_integer() const;
  // Printable form for `drift inspect` (arrays are summarised, long strings cut).
  std::string to_display_string(size_t max_chars = 80) const;
};

struct GgufKeyValue {
  std::string_view key;
  GgufValue value;
};

struct GgufTensor {
  std::string_view name;
  GgmlType type = GgmlType::kF32;
  uint32_t n_dims = 0;
  std::array<uint64_t, 4> ne = {1, 1, 1, 1};  // ne[0] is the contiguous (row) dimension
  uint64_t n_elements = 0;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping, aligned to the file's alignment
};

class GgufFile {
 public:
  static Expected<GgufFile> open(const std::string& path);
  // Parses an existing mapping (or borrowed bytes, for tests and fuzzing).
  static Expected<GgufFile> parse(MappedFile file);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return file_.size(); }
  const std::string& path() const { return file_.path(); }

  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }

  const GgufValue* find(std::string_view key) const;
  const GgufTensor* find_tensor(std::string_view name) const;

  // Typed look-ups; a missing key or a value of another type is an Error naming the key.
  Expected<std::string_view> get_string(std::string_view key) const;
  // Any integer type whose value fits in uint64 (negative values are an error).
  Expected<uint64_t> get_uint(std::string_view key) const;
  Expected<double> get_float(std::string_view key) const;  // float or integer types
  Expected<bool> get_bool(std::string_view key) const;
  Expected<const GgufArray*> get_array(std::string_view key) const;

  GgufFile(GgufFile&&) = default;
  GgufFile& operator=(GgufFile&&) = default;

 private:
  explicit GgufFile(MappedFile file) : file_(std::move(file)) {}
  Status parse_all();

  MappedFile file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string_view, size_t> metadata_index_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace drift
