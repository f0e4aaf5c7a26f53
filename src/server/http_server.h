// The HTTP/1.1 front end: one I/O thread runs every connection with asynchronous accept, read and
// write (Boost.Beast parses, Asio drives), so hundreds of streaming clients cost sockets and
// buffers, not threads. Everything here — and every HttpExchange call — happens on the thread
// that runs the io_context.
//
// Limits that keep slow or hostile clients from pinning resources: a cap on open connections
// (when it is reached, the longest-idle connection that has no request in progress is closed to
// make room; only when none is idle does the newcomer get 503), a cap on the connections of one
// client address (the excess gets 429), a header size limit (431), a body size limit (413), and
// timeouts: a new connection must deliver its first request header within the header timeout
// (so sockets that never send a byte are gone after it), a kept-alive connection its next request
// within the idle timeout; the body and each write have their own (a client that stops reading
// its stream is dropped, which cancels its generation).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/error.h"

namespace boost::asio {
class io_context;
}

namespace drift::server {

struct HttpServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: any free port (HttpServer::port() tells which)
  uint64_t max_body_bytes = 8u << 20;
  uint32_t max_header_bytes = 16u << 10;
  int64_t max_connections = 1024;
  // Connections of one client IP address at once (IPv4-mapped IPv6 counts as the IPv4 address).
  int64_t max_connections_per_client = 512;
  std::chrono::milliseconds idle_timeout{60'000};    // keep-alive connection with no request
  std::chrono::milliseconds header_timeout{10'000};  // connect (or first byte) to end of header
  std::chrono::milliseconds body_timeout{60'000};    // end of header to end of body
  std::chrono::milliseconds write_timeout{60'000};   // one write of a response or stream
};

struct HttpRequest {
  uint64_t id = 0;  // per process
  // The client's x-request-id header when it sent a usable one (1-128 visible ASCII characters),
  // else one made here; returned as the response's x-request-id and logged with the request.
  std::string request_id;
  std::string method;  // HEAD is passed on as "HEAD"; its response's body is not sent
  std::string target;  // path and query (an absolute-form target arrives as its path and query)
  std::string authorization;
  std::string x_api_key;      // Anthropic's key header, which its API routes accept
  std::string if_none_match;  // the header, for the web page's cached files
  std::string body;
  std::chrono::steady_clock::time_point received;
};

// One request's response side. Either respond() once, or start_stream(), send_chunk()..., then
// end_stream(). Calls after the client disconnected (or after the response ended) do nothing.
class HttpExchange {
 public:
  using Headers = std::vector<std::pair<std::string, std::string>>;
  virtual ~HttpExchange() = default;
  virtual void respond(int status, std::string_view content_type, std::string body,
                       const Headers& headers = {}) = 0;
  // Chunked transfer: Server-Sent Events as they are produced.
  virtual void start_stream(int status, std::string_view content_type) = 0;
  virtual void send_chunk(std::string data) = 0;
  virtual void end_stream() = 0;
  // `callback` runs once if the client goes away (or a write times out) before the response
  // ended. Replacing it with an empty function drops the previous one (breaking ownership loops).
  virtual void on_disconnect(std::function<void()> callback) = 0;
  virtual bool disconnected() const = 0;
};

using HttpHandler = std::function<void(HttpRequest, std::shared_ptr<HttpExchange>)>;

struct HttpCounters {
  int64_t open_connections = 0;
  uint64_t requests_total = 0;
  uint64_t responses_4xx = 0;
  uint64_t responses_5xx = 0;
};

class HttpServer {
 public:
  HttpServer(boost::asio::io_context& io, HttpServerConfig config, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts accepting; an error says which address could not be bound and why.
  Status listen();
  uint16_t port() const;
  // Drain: idle keep-alive connections close, busy ones close once their response ends, and
  // every response from now on closes its connection. New connections are still accepted (each
  // for one request), so that /health can tell probes the server is draining.
  void drain();
  // Connections with a response in progress.
  int64_t busy_connections() const;
  HttpCounters counters() const;

  struct Impl;  // shared by the sessions, which may outlive this object by a few handlers

 private:
  std::shared_ptr<Impl> impl_;
};

// "OK", "Bad Request", ... for the status line.
std::string_view http_reason(int status);

}  // namespace drift::server
