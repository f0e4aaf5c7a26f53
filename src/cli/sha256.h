// SHA-256 of data fed in pieces (OpenSSL's EVP digest), as lowercase hex.
#pragma once

#include <memory>
#include <string>

#include "util/error.h"

namespace drift::cli {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t size);
  std::string hex_digest();  // ends the computation

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

// The whole file's digest, read in 1 MiB pieces.
Expected<std::string> sha256_of_file(const std::string& path);

}  // namespace drift::cli
