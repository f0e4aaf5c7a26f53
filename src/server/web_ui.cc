#include "server/web_ui.h"

#include <fmt/format.h>

namespace drift::server {

namespace {

constexpr std::string_view kWebPrefix = "/web/";

const EmbeddedFile* file_named(std::string_view name) {
  for (const EmbeddedFile& file : embedded_web_files())
    if (file.name == name) return &file;
  return nullptr;
}

}  // namespace

const EmbeddedFile* find_web_file(std::string_view path) {
  if (path == "/") return file_named("chat.html");
  if (path == "/engine") return file_named("engine.html");
  if (!path.starts_with(kWebPrefix)) return nullptr;
  const std::string_view name = path.substr(kWebPrefix.size());
  // The pages are reached by their own paths only.
  if (name.ends_with(".html")) return nullptr;
  return file_named(name);
}

std::string_view web_content_type(std::string_view file_name) {
  if (file_name.ends_with(".html")) return "text/html; charset=utf-8";
  if (file_name.ends_with(".css")) return "text/css; charset=utf-8";
  if (file_name.ends_with(".js")) return "text/javascript; charset=utf-8";
  return "application/octet-stream";
}

bool etag_matches(std::string_view if_none_match, std::string_view etag) {
  // A comma-separated list of entity tags, each possibly weak (W/"..."), or "*" (RFC 9110 13.1.2).
  while (!if_none_match.empty()) {
    const size_t comma = if_none_match.find(',');
    std::string_view tag = if_none_match.substr(0, comma);
    while (!tag.empty() && (tag.front() == ' ' || tag.front() == '\t')) tag.remove_prefix(1);
    while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
    if (tag.starts_with("W/")) tag.remove_prefix(2);
    if (tag == "*") return true;
    if (tag.size() == etag.size() + 2 && tag.front() == '"' && tag.back() == '"' &&
        tag.substr(1, etag.size()) == etag)
      return true;
    if (comma == std::string_view::npos) break;
    if_none_match.remove_prefix(comma + 1);
  }
  return false;
}

int serve_web_file(const EmbeddedFile& file, std::string_view if_none_match,
                   HttpExchange& exchange) {
  const HttpExchange::Headers headers = {
      {"ETag", fmt::format("\"{}\"", file.etag)},
      {"Cache-Control", "no-cache"},
      {"Content-Security-Policy", std::string(kContentSecurityPolicy)},
      {"X-Content-Type-Options", "nosniff"},
      {"Referrer-Policy", "no-referrer"},
      {"X-Frame-Options", "DENY"},
  };
  const int status = etag_matches(if_none_match, file.etag) ? 304 : 200;
  exchange.respond(status, web_content_type(file.name),
                   status == 304 ? std::string() : std::string(file.bytes), headers);
  return status;
}

}  // namespace drift::server
