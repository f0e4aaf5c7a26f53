// The web page of `drift serve`: a chat playground at "/" and a live view of the engine at
// "/engine", served from the files built into the binary (web_files.h). The pages are static;
// what they show comes from the API (/v1/chat/completions, /v1/engine/events) with the key the
// user typed, so serving them needs no key.
//
// Every response carries a Content-Security-Policy that allows only this server's own scripts,
// styles and connections (no inline script, no eval, no other origin), and an ETag with
// "Cache-Control: no-cache": browsers keep the files but revalidate them (a 304 without a body),
// so a new binary's page is never hidden behind a stale copy.
#pragma once

#include <string_view>

#include "server/http_server.h"
#include "server/web_files.h"

namespace drift::server {

inline constexpr std::string_view kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// The file served at `path` (no query): "/" chat.html, "/engine" engine.html, "/web/<name>" the
// other files; nullptr for any other path.
const EmbeddedFile* find_web_file(std::string_view path);

// By the file name's extension: text/html, text/css, text/javascript (UTF-8).
std::string_view web_content_type(std::string_view file_name);

// True when an If-None-Match header value names `etag` (or is "*").
bool etag_matches(std::string_view if_none_match, std::string_view etag);

// Answers a GET or HEAD of `file`: 304 when the browser's copy is current, else 200 with it.
// Returns the status sent.
int serve_web_file(const EmbeddedFile& file, std::string_view if_none_match,
                   HttpExchange& exchange);

}  // namespace drift::server
