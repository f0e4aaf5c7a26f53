#include "http_fetch.h"

#include <curl/curl.h>

#include <memory>

namespace drift::cli {

namespace {

struct Transfer {
  const std::function<bool(const char*, size_t)>* sink;
  const std::function<void(uint64_t, uint64_t)>* on_progress;
};

size_t write_body(char* data, size_t size, size_t count, void* user) {
  auto* transfer = static_cast<Transfer*>(user);
  return (*transfer->sink)(data, size * count) ? size * count : 0;
}

int report_progress(void* user, curl_off_t total, curl_off_t received, curl_off_t, curl_off_t) {
  auto* transfer = static_cast<Transfer*>(user);
  if (*transfer->on_progress) (*transfer->on_progress)(uint64_t(received), uint64_t(total));
  return 0;
}

// libcurl's global set-up, once per process (it is not thread-safe, so it is not left to the
// first easy handle).
void init_curl_once() {
  static const bool done = [] {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return true;
  }();
  (void)done;
}

}  // namespace

Status http_get_stream(const std::string& url,
                       const std::function<bool(const char* data, size_t size)>& sink,
                       const std::function<void(uint64_t received, uint64_t total)>& on_progress) {
  init_curl_once();
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return make_error("GET {}: could not start libcurl", url);
  Transfer transfer{&sink, &on_progress};
  char error[CURL_ERROR_SIZE] = {};
  CURL* h = curl.get();
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
  // A stalled transfer (under 1 KB/s for 60 s) is an error rather than a hang.
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "drift/" DRIFT_VERSION);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, report_progress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &transfer);
  const CURLcode code = curl_easy_perform(h);
  if (code != CURLE_OK)
    return make_error("GET {}: {}", url, error[0] != '\0' ? error : curl_easy_strerror(code));
  return Status::Ok();
}

Expected<std::string> http_get_text(const std::string& url) {
  std::string body;
  constexpr size_t kLimit = 64u << 20;  // an index page, not a model
  DRIFT_RETURN_IF_ERROR(http_get_stream(url,
                                        [&](const char* data, size_t size) {
                                          if (body.size() + size > kLimit) return false;
                                          body.append(data, size);
                                          return true;
                                        },
                                        {}));
  return body;
}

}  // namespace drift::cli
