// HTTP(S) GETs through libcurl, for fetching models: redirects followed, proxies from the usual
// environment variables (https_proxy, no_proxy), an HTTP error status is an error naming the URL.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "util/error.h"

namespace drift::cli {

// The whole body of a small response (an index page).
Expected<std::string> http_get_text(const std::string& url);

// Streams the body to `sink` as it arrives; `on_progress(received, total)` is called as bytes
// arrive (total 0 when the server does not say). A false return of `sink` aborts the transfer.
Status http_get_stream(const std::string& url,
                       const std::function<bool(const char* data, size_t size)>& sink,
                       const std::function<void(uint64_t received, uint64_t total)>& on_progress);

}  // namespace drift::cli
