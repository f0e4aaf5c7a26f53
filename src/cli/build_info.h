// How this drift binary was built (written at build time by cmake/write_build_info.cmake), and
// the text of `drift --version`.
#pragma once

#include <string>

namespace drift::cli {

extern const char* const kBuildCommit;    // `git describe --always --dirty`, or "unknown"
extern const char* const kBuildType;      // CMAKE_BUILD_TYPE
extern const char* const kBuildCompiler;  // e.g. "GNU 12.2.0"

// Version, commit, build type, compiler, and the CPU features and kernel path this machine gets.
std::string version_text();

}  // namespace drift::cli
