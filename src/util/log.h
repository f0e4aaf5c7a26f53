// Logging goes to stderr through spdlog, so that stdout carries only a command's output
// (generated text, token ids, JSON).
//
// Two formats: text for a terminal, and JSON lines for log shippers (one object per line with
// "timestamp", "level", "event", "message" and the event's fields). Events a machine should find
// (the access log, the server's lifecycle) go through log_event(), which names the event and
// carries typed fields; plain spdlog calls appear in JSON as event "log".
#pragma once

#include <spdlog/spdlog.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "util/error.h"

namespace drift {

enum class LogFormat { kText, kJson };

std::optional<LogFormat> parse_log_format(std::string_view name);

// Installs the stderr logger. `level` is one of trace, debug, info, warn, error, off.
Status init_logging(std::string_view level, LogFormat format = LogFormat::kText);

struct LogField {
  std::string_view key;
  std::variant<std::string_view, int64_t, double, bool> value;
};

// One named event with fields, keys of the object in JSON. In text, a message stands alone (it
// says what the fields say, for a person); without one the line is the event's name followed by
// `request_id=7f.. status=200`. Nothing is formatted when the level is disabled.
void log_event(spdlog::level::level_enum level, std::string_view event,
               std::initializer_list<LogField> fields, std::string_view message = {});

// `text` as the body of a JSON string (quotes, backslashes and control characters escaped).
void append_json_escaped(std::string& out, std::string_view text);

}  // namespace drift
