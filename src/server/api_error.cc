#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace drift::server {

ApiError bad_request(std::string message, std::string_view param) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  if (!param.empty()) e.param = std::string(param);
  return e;
}

ApiError not_found(std::string message, std::string_view code) {
  ApiError e;
  e.status = 404;
  e.type = "not_found_error";
  e.message = std::move(message);
  if (!code.empty()) e.code = std::string(code);
  return e;
}

ApiError unauthorized() {
  ApiError e;
  e.status = 401;
  e.type = "authentication_error";
  e.message = "invalid or missing API key: send the header 'Authorization: Bearer <key>'";
  e.code = "invalid_api_key";
  return e;
}

ApiError overloaded(std::string message) {
  ApiError e;
  e.status = 429;
  e.type = "rate_limit_error";
  e.message = std::move(message);
  e.code = "overloaded";
  e.retry_after_seconds = 1;
  return e;
}

ApiError unavailable(std::string message) {
  ApiError e;
  e.status = 503;
  e.type = "service_unavailable";
  e.message = std::move(message);
  e.retry_after_seconds = 1;
  return e;
}

ApiError internal_error(std::string message) {
  ApiError e;
  e.status = 500;
  e.type = "internal_server_error";
  e.message = std::move(message);
  return e;
}

std::string error_json(const ApiError& error) {
  nlohmann::json body = {{"error",
                          {{"message", error.message},
                           {"type", error.type},
                           {"param", error.param ? nlohmann::json(*error.param) : nullptr},
                           {"code", error.code ? nlohmann::json(*error.code) : nullptr}}}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace drift::server
