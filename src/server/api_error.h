// OpenAI-style errors: every failure a client sees is `{"error": {"message", "type", "param",
// "code"}}` with an HTTP status, so that OpenAI clients raise their usual exception classes
// (BadRequestError, AuthenticationError, NotFoundError, RateLimitError, ...).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace drift::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::optional<std::string> param;  // the request field at fault, when one is
  std::optional<std::string> code;
  // Seconds a client should wait before retrying (429/503), sent as Retry-After.
  std::optional<int> retry_after_seconds;
};

// 400 invalid_request_error naming `param` (may be empty).
ApiError bad_request(std::string message, std::string_view param = {});
ApiError not_found(std::string message, std::string_view code = {});
ApiError unauthorized();
ApiError overloaded(std::string message);   // 429, Retry-After: 1
ApiError unavailable(std::string message);  // 503, Retry-After: 1
ApiError internal_error(std::string message);

// The error body. Messages may hold any bytes a client sent: they are made valid UTF-8 (invalid
// bytes become U+FFFD) so the JSON is never broken.
std::string error_json(const ApiError& error);

}  // namespace drift::server
