#include "util/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <chrono>
#include <ctime>

#include "util/utf8.h"

namespace drift {

namespace {

// The fields of the log_event() call in progress on this thread. spdlog's synchronous logger
// formats in the calling thread, inside that call, so the formatter sees exactly that event's
// fields; a plain spdlog call sees none.
struct PendingEvent {
  std::string_view event;
  std::string_view message;  // without the text form's fields
  std::initializer_list<LogField> fields;
};
thread_local const PendingEvent* pending_event = nullptr;

void append_value(std::string& out, const LogField& field, bool json) {
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::string_view>) {
          if (json) {
            out += '"';
            append_json_escaped(out, v);
            out += '"';
          } else {
            out += v;
          }
        } else if constexpr (std::is_same_v<V, bool>) {
          out += v ? "true" : "false";
        } else if constexpr (std::is_same_v<V, double>) {
          fmt::format_to(std::back_inserter(out), "{:.3f}", v);
        } else {
          fmt::format_to(std::back_inserter(out), "{}", v);
        }
      },
      field.value);
}

std::string_view level_name(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
      return "trace";
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warn";
    case spdlog::level::err:
      return "error";
    case spdlog::level::critical:
      return "critical";
    default:
      return "off";
  }
}

// One JSON object per line: {"timestamp":"2026-11-24T20:01:02.345Z","level":"info",
// "event":"http_request","message":"...", <fields>}.
class JsonLineFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string line;
    line.reserve(256);
    const auto since_epoch = msg.time.time_since_epoch();
    const std::time_t seconds =
        std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count();
    const int64_t millis =
        std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count() % 1000;
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    fmt::format_to(
        std::back_inserter(line),
        "{{\"timestamp\":\"{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z\",\"level\":\"{}\"",
        utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
        millis, level_name(msg.level));
    const PendingEvent* event = pending_event;
    line += ",\"event\":\"";
    append_json_escaped(line, event != nullptr ? event->event : std::string_view("log"));
    line += "\",\"message\":\"";
    append_json_escaped(line, event != nullptr
                                  ? event->message
                                  : std::string_view(msg.payload.data(), msg.payload.size()));
    line += '"';
    if (event != nullptr) {
      for (const LogField& field : event->fields) {
        line += ",\"";
        append_json_escaped(line, field.key);
        line += "\":";
        append_value(line, field, /*json=*/true);
      }
    }
    line += "}\n";
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLineFormatter>();
  }
};

}  // namespace

std::optional<LogFormat> parse_log_format(std::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return std::nullopt;
}

Status init_logging(std::string_view level, LogFormat format) {
  spdlog::level::level_enum parsed = spdlog::level::from_str(std::string(level));
  // from_str maps unknown names to "off"; only accept that for the literal "off".
  if (parsed == spdlog::level::off && level != "off")
    return make_error("unknown log level '{}' (trace, debug, info, warn, error, off)", level);
  auto logger = spdlog::get("drift");
  if (!logger) logger = spdlog::stderr_color_mt("drift");
  if (format == LogFormat::kJson) {
    logger->set_formatter(std::make_unique<JsonLineFormatter>());
  } else {
    logger->set_formatter(std::make_unique<spdlog::pattern_formatter>("%^[%H:%M:%S.%e %L]%$ %v"));
  }
  logger->set_level(parsed);
  spdlog::set_default_logger(logger);
  return Status::Ok();
}

void log_event(spdlog::level::level_enum level, std::string_view event,
               std::initializer_list<LogField> fields, std::string_view message) {
  auto logger = spdlog::default_logger_raw();
  if (!logger->should_log(level)) return;
  // Without a message, the text form carries the fields; the JSON formatter writes them as keys.
  std::string text(message);
  if (message.empty()) {
    message = event;
    text = event;
    for (const LogField& field : fields) {
      text += ' ';
      text += field.key;
      text += '=';
      append_value(text, field, /*json=*/false);
    }
  }
  const PendingEvent pending{event, message, fields};
  pending_event = &pending;
  logger->log(level, std::string_view(text));
  pending_event = nullptr;
}

void append_json_escaped(std::string& out, std::string_view text) {
  // Log shippers reject invalid UTF-8: a stray byte (from a client's path, say) becomes U+FFFD.
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = repair_utf8(text);
    text = repaired;
  }
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
}

}  // namespace drift
