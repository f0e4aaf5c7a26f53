// The web page's files (src/server/web/), built into the binary by cmake/embed_files.cmake: the
// server needs no file system or network to serve them.
#pragma once

#include <span>
#include <string_view>

namespace drift::server {

struct EmbeddedFile {
  std::string_view name;  // file name in src/server/web/, e.g. "chat.js"
  std::string_view bytes;
  std::string_view etag;  // 16 hex digits of the SHA-256 of `bytes`
};

// Every file of src/server/web/, in the order CMake listed them. Defined in the generated
// web_files.cc of the build tree.
std::span<const EmbeddedFile> embedded_web_files();

}  // namespace drift::server
