#include "util/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace drift {

Status init_logging(std::string_view level) {
  spdlog::level::level_enum parsed = spdlog::level::from_str(std::string(level));
  // from_str maps unknown names to "off"; only accept that for the literal "off".
  if (parsed == spdlog::level::off && level != "off")
    return make_error("unknown log level '{}' (trace, debug, info, warn, error, off)", level);
  auto logger = spdlog::get("drift");
  if (!logger) logger = spdlog::stderr_color_mt("drift");
  logger->set_pattern("%^[%H:%M:%S.%e %L]%$ %v");
  logger->set_level(parsed);
  spdlog::set_default_logger(logger);
  return Status::Ok();
}

}  // namespace drift
