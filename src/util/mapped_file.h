// A read-only memory mapping of a whole file. Move-only; unmaps on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/error.h"

namespace drift {

class MappedFile {
 public:
  static Expected<MappedFile> open(const std::string& path);
  // Wraps caller-owned bytes without mapping (tests, fuzzing). The bytes must outlive this object.
  static MappedFile borrow(const uint8_t* data, size_t size);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  void reset();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool owns_mapping_ = false;
  std::string path_;
};

}  // namespace drift
