// Logging goes to stderr through spdlog, so that stdout carries only a command's output
// (generated text, token ids, JSON).
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

#include "util/error.h"

namespace drift {

// Installs the stderr logger with drift's pattern. `level` is one of trace, debug, info, warn,
// error, off.
Status init_logging(std::string_view level);

}  // namespace drift
