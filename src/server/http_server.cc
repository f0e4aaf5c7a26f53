#include "server/http_server.h"

#include <fmt/format.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <deque>
#include <optional>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "server/api_error.h"
#include "util/log.h"

namespace drift::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

std::string_view http_reason(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

class Session;

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Impl(asio::io_context& io_, HttpServerConfig config_, HttpHandler handler_)
      : io(io_),
        config(std::move(config_)),
        handler(std::move(handler_)),
        acceptor(io_),
        retry_timer(io_) {}

  void accept();
  // Over max_connections: closes the connection that has waited longest for a request (none in
  // progress). False if every connection is reading or answering one.
  bool reclaim_idle(const Session* newcomer);

  asio::io_context& io;
  const HttpServerConfig config;
  const HttpHandler handler;
  tcp::acceptor acceptor;
  asio::steady_timer retry_timer;  // accept errors (out of descriptors) retry after a pause
  bool draining = false;
  uint64_t next_request_id = 1;
  // Made request ids are this process's random prefix and the request's number, so ids from
  // replicas behind one load balancer do not collide.
  const std::string request_id_prefix = fmt::format("{:08x}", std::random_device{}());
  HttpCounters counters;
  int64_t busy = 0;
  std::unordered_set<Session*> sessions;
  std::unordered_map<std::string, int64_t> connections_per_client;  // by client IP address
};

namespace {

// The key connections are counted by: the client's IP address (an IPv4-mapped IPv6 address as
// its IPv4 form, so a dual-stack listener counts one client once).
std::string client_key(const tcp::socket& socket) {
  error_code ec;
  const tcp::endpoint remote = socket.remote_endpoint(ec);
  if (ec) return "?";
  asio::ip::address address = remote.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped())
    address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  return address.to_string();
}

// An absolute-form request target ("http://host:8080/v1/models?x=1", RFC 9112 3.2.2, sent to
// proxies and accepted by servers) as its origin form ("/v1/models?x=1").
std::string origin_form(std::string_view target) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.size() < scheme.size()) continue;
    bool match = true;
    for (size_t i = 0; i < scheme.size() && match; ++i)
      match = std::tolower(static_cast<unsigned char>(target[i])) == scheme[i];
    if (!match) continue;
    const std::string_view rest = target.substr(scheme.size());
    const size_t path = rest.find_first_of("/?");
    if (path == std::string_view::npos) return "/";
    if (rest[path] == '?') return "/" + std::string(rest.substr(path));
    return std::string(rest.substr(path));
  }
  return std::string(target);
}

// The client's x-request-id if it is one a log line can carry as it is, else a new one.
std::string choose_request_id(std::string_view from_client, const std::string& prefix,
                              uint64_t number) {
  bool usable = !from_client.empty() && from_client.size() <= 128;
  for (char c : from_client) usable = usable && c > 0x20 && c < 0x7f;
  if (usable) return std::string(from_client);
  return fmt::format("{}-{:x}", prefix, number);
}

std::string response_head(int status, std::string_view content_type, bool keep_alive,
                          const HttpExchange::Headers& headers,
                          std::optional<size_t> content_length) {
  std::string head = fmt::format("HTTP/1.1 {} {}\r\nServer: drift\r\nContent-Type: {}\r\n", status,
                                 http_reason(status), content_type);
  if (content_length) {
    head += fmt::format("Content-Length: {}\r\n", *content_length);
  } else {
    head += "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n";
  }
  head += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [name, value] : headers) head += fmt::format("{}: {}\r\n", name, value);
  head += "\r\n";
  return head;
}

}  // namespace

// One TCP connection, serving its requests one after another (keep-alive). States:
//   waiting  for the next request (idle timeout; a readable socket starts the header read)
//   reading  a request's header and body (header and body timeouts)
//   busy     the handler holds an exchange; a readability wait watches for the client leaving
//   closed
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<HttpServer::Impl> server, tcp::socket socket)
      : server_(std::move(server)),
        socket_(std::move(socket)),
        deadline_(server_->io),
        client_(client_key(socket_)) {
    server_->sessions.insert(this);
    ++server_->counters.open_connections;
    ++server_->connections_per_client[client_];
  }
  ~Session() {
    server_->sessions.erase(this);
    --server_->counters.open_connections;
    auto it = server_->connections_per_client.find(client_);
    if (--it->second == 0) server_->connections_per_client.erase(it);
  }

  void start() { wait_for_request(); }
  // Over a connection cap: one error response (429 or 503, with Retry-After) and close.
  void refuse(ApiError error) {
    state_ = State::kBusy;
    ++serial_;
    ++server_->busy;
    keep_alive_ = false;
    new_request_id("");
    error.retry_after_seconds = 1;
    respond(serial_, error.status, "application/json", error_json(error), {{"Retry-After", "1"}});
  }
  void close_if_idle() {
    if (state_ == State::kWaiting) close();
  }
  // Waiting for a request (a new connection's first, or a kept-alive one's next) since when;
  // nullopt while a request is read or answered.
  std::optional<std::chrono::steady_clock::time_point> idle_since() const {
    if (state_ != State::kWaiting) return std::nullopt;
    return waiting_since_;
  }
  int64_t client_connections() const { return server_->connections_per_client[client_]; }
  const std::string& client() const { return client_; }

  // ---- the exchange's calls, checked against the request they belong to ----
  void respond(uint64_t serial, int status, std::string_view content_type, std::string body,
               const HttpExchange::Headers& headers) {
    if (!current(serial) || response_started_) return;
    count_status(status);
    response_started_ = true;
    response_ended_ = true;
    if (server_->draining) keep_alive_ = false;
    HttpExchange::Headers with_id = headers;
    with_id.emplace_back("x-request-id", request_id_);
    std::string head = response_head(status, content_type, keep_alive_, with_id, body.size());
    enqueue(head_only_ ? std::move(head) : std::move(head) + body);  // HEAD: the length, no body
  }
  void start_stream(uint64_t serial, int status, std::string_view content_type) {
    if (!current(serial) || response_started_) return;
    count_status(status);
    response_started_ = true;
    chunked_ = true;
    if (server_->draining) keep_alive_ = false;
    enqueue(response_head(status, content_type, keep_alive_, {{"x-request-id", request_id_}},
                          std::nullopt));
  }
  void send_chunk(uint64_t serial, std::string data) {
    if (!current(serial) || !chunked_ || response_ended_ || data.empty() || head_only_) return;
    enqueue(fmt::format("{:x}\r\n", data.size()) + data + "\r\n");
  }
  void end_stream(uint64_t serial) {
    if (!current(serial) || !chunked_ || response_ended_) return;
    response_ended_ = true;
    enqueue(head_only_ ? std::string() : std::string("0\r\n\r\n"));
  }
  void on_disconnect(uint64_t serial, std::function<void()> callback) {
    if (serial == serial_) on_disconnect_ = std::move(callback);
  }
  bool disconnected(uint64_t serial) const { return serial != serial_ || state_ == State::kClosed; }

 private:
  enum class State { kWaiting, kReading, kBusy, kClosed };

  bool current(uint64_t serial) const { return serial == serial_ && state_ == State::kBusy; }

  void count_status(int status) {
    if (status >= 500) {
      ++server_->counters.responses_5xx;
    } else if (status >= 400) {
      ++server_->counters.responses_4xx;
    }
  }

  // ---- deadlines: one timer; a generation number makes a re-armed or cancelled wait inert ----
  void arm(std::chrono::milliseconds after) {
    const uint64_t gen = ++deadline_gen_;
    deadline_.expires_after(after);
    deadline_.async_wait([self = weak_from_this(), gen](const error_code& ec) {
      auto s = self.lock();
      if (!ec && s && s->deadline_gen_ == gen) s->close();
    });
  }
  void disarm() {
    ++deadline_gen_;
    deadline_.cancel();
  }

  // ---- reading requests ----
  void wait_for_request() {
    state_ = State::kWaiting;
    waiting_since_ = std::chrono::steady_clock::now();
    // Draining: a connection that has been answered goes; a new one gets its one request.
    if (server_->draining && serial_ > 0) return close();
    // A new connection gets the header timeout for its first request: a socket that never
    // sends a byte must not hold a connection slot for the (longer) keep-alive idle timeout.
    arm(serial_ == 0 ? server_->config.header_timeout : server_->config.idle_timeout);
    if (buffer_.size() > 0) return read_header();  // a pipelined request is already here
    if (!wait_pending_) watch_readable();
  }

  void watch_readable() {
    wait_pending_ = true;
    socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](const error_code& ec) {
      self->wait_pending_ = false;
      self->on_readable(ec);
    });
  }

  void on_readable(const error_code& ec) {
    if (state_ == State::kClosed) return;
    if (ec) return close();
    if (state_ == State::kWaiting) return read_header();
    if (state_ != State::kBusy) return;
    // Busy: readable means the client closed (or reset), or it pipelined another request.
    char byte;
    error_code peek_ec;
    socket_.non_blocking(true, peek_ec);
    const size_t n = socket_.receive(asio::buffer(&byte, 1), tcp::socket::message_peek, peek_ec);
    if (peek_ec == asio::error::would_block) return watch_readable();
    if (peek_ec || n == 0) return close();
    pipelined_ = true;  // read it after this response; stop watching (it would fire at once)
  }

  void read_header() {
    state_ = State::kReading;
    arm(server_->config.header_timeout);
    parser_.emplace();
    parser_->header_limit(server_->config.max_header_bytes);
    parser_->body_limit(server_->config.max_body_bytes);
    http::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](const error_code& ec, size_t) { self->on_header(ec); });
  }

  void on_header(const error_code& ec) {
    if (state_ == State::kClosed) return;
    if (ec) return on_read_error(ec);
    const auto& req = parser_->get();
    if (req[http::field::expect] == "100-continue") {
      error_code write_ec;
      asio::write(socket_, asio::buffer(std::string_view("HTTP/1.1 100 Continue\r\n\r\n")),
                  write_ec);
      if (write_ec) return close();
    }
    arm(server_->config.body_timeout);
    http::async_read(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](const error_code& ec, size_t) { self->on_body(ec); });
  }

  void on_body(const error_code& ec) {
    if (state_ == State::kClosed) return;
    if (ec) return on_read_error(ec);
    auto& req = parser_->get();
    HttpRequest request;
    request.id = server_->next_request_id;
    request.method = std::string(req.method_string());
    request.target = origin_form(std::string_view(req.target().data(), req.target().size()));
    const auto client_id = req["x-request-id"];
    request.request_id = new_request_id(std::string_view(client_id.data(), client_id.size()));
    head_only_ = req.method() == http::verb::head;
    request.authorization = std::string(req[http::field::authorization]);
    request.x_api_key = std::string(req["x-api-key"]);
    request.if_none_match = std::string(req[http::field::if_none_match]);
    request.body = std::move(req.body());
    request.received = std::chrono::steady_clock::now();
    keep_alive_ = req.keep_alive();
    parser_.reset();

    state_ = State::kBusy;
    ++serial_;
    ++server_->counters.requests_total;
    ++server_->busy;
    response_started_ = response_ended_ = chunked_ = false;
    disarm();
    if (buffer_.size() > 0) {
      pipelined_ = true;
    } else if (!wait_pending_) {
      watch_readable();  // notices the client leaving while the handler works
    }
    server_->handler(std::move(request), make_exchange());
  }

  // A request that cannot be read: answer what went wrong when it is the client's fault, then
  // close (the stream position is unknown after a failed parse).
  void on_read_error(const error_code& ec) {
    if (ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::operation_aborted || ec == asio::error::connection_reset)
      return close();
    ApiError error;
    if (ec == http::error::body_limit) {
      error = bad_request(fmt::format("the request body exceeds the limit of {} bytes",
                                      server_->config.max_body_bytes));
      error.status = 413;
    } else if (ec == http::error::header_limit) {
      error = bad_request(fmt::format("the request header exceeds the limit of {} bytes",
                                      server_->config.max_header_bytes));
      error.status = 431;
    } else {
      error = bad_request(fmt::format("malformed HTTP request: {}", ec.message()));
    }
    parser_.reset();
    new_request_id("");
    state_ = State::kBusy;
    ++serial_;
    ++server_->counters.requests_total;
    ++server_->busy;
    response_started_ = response_ended_ = chunked_ = head_only_ = false;
    keep_alive_ = false;
    linger_ = true;  // the client may still be sending the body we refused
    respond(serial_, error.status, "application/json", error_json(error), {});
  }

  // ---- writing ----
  void enqueue(std::string data) {
    out_.push_back(std::move(data));
    if (!writing_) write_next();
  }

  void write_next() {
    if (state_ == State::kClosed) return;
    if (out_.empty()) {
      writing_ = false;
      if (response_ended_) return finish_exchange();
      return disarm();
    }
    writing_ = true;
    arm(server_->config.write_timeout);
    // Everything queued goes out in one write: many small SSE events, few system calls.
    writing_buffer_.clear();
    for (std::string& s : out_) writing_buffer_ += s;
    out_.clear();
    asio::async_write(socket_, asio::buffer(writing_buffer_),
                      [self = shared_from_this()](const error_code& ec, size_t) {
                        if (ec) return self->close();
                        self->write_next();
                      });
  }

  void finish_exchange() {
    on_disconnect_ = nullptr;
    ++serial_;  // the exchange is spent
    --server_->busy;
    state_ = State::kWaiting;
    if (linger_) return linger();
    if (!keep_alive_) {
      error_code ignored;
      socket_.shutdown(tcp::socket::shutdown_send, ignored);
      return close();
    }
    if (pipelined_) {
      pipelined_ = false;
      state_ = State::kWaiting;
      arm(server_->config.idle_timeout);
      return read_header();
    }
    wait_for_request();
  }

  // After refusing a request mid-upload: stop sending, read and drop what the client still
  // sends (so it sees our answer instead of a reset) for a bounded time and size, then close.
  void linger() {
    state_ = State::kReading;
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    arm(std::chrono::milliseconds(2000));
    drain_some();
  }
  void drain_some() {
    socket_.async_read_some(asio::buffer(drain_buffer_),
                            [self = shared_from_this()](const error_code& ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > (64u << 20)) return self->close();
                              self->drain_some();
                            });
  }

  void close() {
    if (state_ == State::kClosed) return;
    const bool was_busy = state_ == State::kBusy;
    state_ = State::kClosed;
    if (was_busy) --server_->busy;
    disarm();
    error_code ignored;
    socket_.close(ignored);
    if (auto callback = std::move(on_disconnect_)) {
      on_disconnect_ = nullptr;
      callback();
    }
  }

  std::shared_ptr<HttpExchange> make_exchange();

  // The current request's id: the client's x-request-id if usable, else a new one.
  const std::string& new_request_id(std::string_view from_client) {
    request_id_ =
        choose_request_id(from_client, server_->request_id_prefix, server_->next_request_id++);
    return request_id_;
  }

  const std::shared_ptr<HttpServer::Impl> server_;
  tcp::socket socket_;
  asio::steady_timer deadline_;
  const std::string client_;  // client_key(): what the per-client cap counts
  std::chrono::steady_clock::time_point waiting_since_;
  uint64_t deadline_gen_ = 0;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  State state_ = State::kWaiting;
  uint64_t serial_ = 0;  // the exchange currently valid
  bool wait_pending_ = false;
  bool keep_alive_ = true;
  bool pipelined_ = false;
  bool response_started_ = false;
  bool response_ended_ = false;
  bool chunked_ = false;
  bool linger_ = false;
  bool writing_ = false;
  bool head_only_ = false;  // the current request is HEAD
  std::deque<std::string> out_;
  std::string writing_buffer_;
  std::array<char, 16384> drain_buffer_;
  uint64_t drained_ = 0;
  std::function<void()> on_disconnect_;
  std::string request_id_;  // of the request being answered
};

namespace {

class Exchange : public HttpExchange {
 public:
  Exchange(std::shared_ptr<Session> session, uint64_t serial)
      : session_(std::move(session)), serial_(serial) {}
  void respond(int status, std::string_view content_type, std::string body,
               const Headers& headers) override {
    session_->respond(serial_, status, content_type, std::move(body), headers);
  }
  void start_stream(int status, std::string_view content_type) override {
    session_->start_stream(serial_, status, content_type);
  }
  void send_chunk(std::string data) override { session_->send_chunk(serial_, std::move(data)); }
  void end_stream() override { session_->end_stream(serial_); }
  void on_disconnect(std::function<void()> callback) override {
    session_->on_disconnect(serial_, std::move(callback));
  }
  bool disconnected() const override { return session_->disconnected(serial_); }

 private:
  std::shared_ptr<Session> session_;
  uint64_t serial_;
};

}  // namespace

std::shared_ptr<HttpExchange> Session::make_exchange() {
  return std::make_shared<Exchange>(shared_from_this(), serial_);
}

void HttpServer::Impl::accept() {
  // The handler shares ownership of the Impl, so it may run after ~HttpServer.
  acceptor.async_accept([this, keep = shared_from_this()](const error_code& ec,
                                                          tcp::socket socket) {
    if (!acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors (or similar): pause instead of spinning on the error.
      spdlog::warn("accept failed: {}; retrying in 100 ms", ec.message());
      retry_timer.expires_after(std::chrono::milliseconds(100));
      retry_timer.async_wait([this, keep = shared_from_this()](const error_code& e) {
        if (!e) accept();
      });
      return;
    }
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    auto session = std::make_shared<Session>(shared_from_this(), std::move(socket));
    if (session->client_connections() > config.max_connections_per_client) {
      ApiError error =
          overloaded(fmt::format("too many connections from {}: at most {} at once; reuse a "
                                 "keep-alive connection or close idle ones",
                                 session->client(), config.max_connections_per_client));
      session->refuse(std::move(error));
    } else if (counters.open_connections > config.max_connections && !reclaim_idle(session.get())) {
      session->refuse(unavailable("too many open connections; retry later"));
    } else {
      session->start();
    }
    accept();
  });
}

bool HttpServer::Impl::reclaim_idle(const Session* newcomer) {
  Session* oldest = nullptr;
  std::chrono::steady_clock::time_point oldest_since;
  for (Session* s : sessions) {
    const auto since = s->idle_since();
    if (s == newcomer || !since) continue;
    if (!oldest || *since < oldest_since) {
      oldest = s;
      oldest_since = *since;
    }
  }
  if (!oldest) return false;
  oldest->close_if_idle();  // a kept-alive client sees the close and reconnects
  return true;
}

HttpServer::HttpServer(asio::io_context& io, HttpServerConfig config, HttpHandler handler)
    : impl_(std::make_shared<Impl>(io, std::move(config), std::move(handler))) {}

HttpServer::~HttpServer() {
  error_code ignored;
  impl_->acceptor.close(ignored);
  impl_->retry_timer.cancel();
}

Status HttpServer::listen() {
  error_code ec;
  const auto address = asio::ip::make_address(impl_->config.host, ec);
  if (ec)
    return make_error("--host '{}' is not an IP address: {}", impl_->config.host, ec.message());
  const tcp::endpoint endpoint(address, impl_->config.port);
  auto& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return make_error("cannot listen on {}:{}: {}", impl_->config.host, impl_->config.port,
                      ec.message());
  impl_->accept();
  return Status::Ok();
}

uint16_t HttpServer::port() const {
  error_code ec;
  auto endpoint = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : endpoint.port();
}

void HttpServer::drain() {
  impl_->draining = true;
  // Copy first: closing removes sessions from the set.
  std::vector<Session*> sessions(impl_->sessions.begin(), impl_->sessions.end());
  for (Session* s : sessions) {
    if (impl_->sessions.count(s)) s->close_if_idle();
  }
}

int64_t HttpServer::busy_connections() const { return impl_->busy; }
HttpCounters HttpServer::counters() const { return impl_->counters; }

}  // namespace drift::server
