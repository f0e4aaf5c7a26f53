# cmake -DOUTPUT=<file.cc> -DHEADER=<include> -DINPUTS=<a;b;...> -P embed_files.cmake
#
# Writes OUTPUT: a C++ source that defines `std::span<const EmbeddedFile> embedded_web_files()`
# (declared in HEADER) holding each input file's name, bytes and the first 16 hex digits of its
# SHA-256 (an ETag that changes exactly when the file does). The server's web page is built into
# the binary this way at build time, so the page's files stay plain files in the source tree.
foreach(var OUTPUT HEADER INPUTS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_files.cmake: -D${var}=... is required")
  endif()
endforeach()

set(arrays "")
set(entries "")
set(index 0)
foreach(input IN LISTS INPUTS)
  get_filename_component(name ${input} NAME)
  file(READ ${input} hex HEX)
  file(SHA256 ${input} digest)
  string(SUBSTRING ${digest} 0 16 etag)
  string(LENGTH "${hex}" hex_length)
  math(EXPR size "${hex_length} / 2")
  # One initializer per byte, on one line (CMake's regular expressions cannot count to wrap it).
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND arrays "alignas(8) const unsigned char kFile${index}[] = {\n    ${bytes}0x00};\n")
  string(APPEND entries
         "    {\"${name}\", {reinterpret_cast<const char*>(kFile${index}), ${size}}, \"${etag}\"},\n")
  math(EXPR index "${index} + 1")
endforeach()

set(source "// Generated at build time by cmake/embed_files.cmake; do not edit.
#include \"${HEADER}\"

namespace drift::server {
namespace {

// Each file's bytes and a terminating NUL that is not part of it.
${arrays}
const EmbeddedFile kFiles[] = {
${entries}};

}  // namespace

std::span<const EmbeddedFile> embedded_web_files() { return kFiles; }

}  // namespace drift::server
")
# Rewrite only on change, so that a reconfigure does not rebuild the server.
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
  if(old STREQUAL source)
    return()
  endif()
endif()
file(WRITE ${OUTPUT} "${source}")
