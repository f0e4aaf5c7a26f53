// The HTTP layer on loopback with a fake handler (no engine): keep-alive, chunked streams, the
// disconnect callback, the size limits and the connection cap.
#include "server/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <utility>

namespace drift::server {
namespace {

class Client {
 public:
  // `source`: the local IPv4 address to connect from (any of 127/8 works on loopback), so that
  // tests can play several clients.
  explicit Client(uint16_t port, const char* source = nullptr) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (source) {
      sockaddr_in local{};
      local.sin_family = AF_INET;
      inet_pton(AF_INET, source, &local.sin_addr);
      EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local), 0);
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    timeval tv{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~Client() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void send(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may close early (413): not a test failure by itself
      sent += size_t(n);
    }
  }
  // Reads until `marker` has arrived (or EOF / timeout).
  std::string read_until(const std::string& marker) {
    while (buffer_.find(marker) == std::string::npos) {
      char chunk[65536];
      ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) break;
      buffer_.append(chunk, size_t(n));
    }
    std::string out = buffer_;
    buffer_.clear();
    return out;
  }
  bool closed_by_peer() {
    char c;
    return recv(fd_, &c, 1, 0) == 0;
  }

 private:
  int fd_ = -1;
  std::string buffer_;
};

std::string get(const std::string& path) { return "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n"; }

class HttpServerTest : public ::testing::Test {
 protected:
  void start(HttpServerConfig config = {}) {
    config.port = 0;
    server_ = std::make_unique<HttpServer>(io_, config, [this](HttpRequest r, auto exchange) {
      handle(std::move(r), std::move(exchange));
    });
    ASSERT_TRUE(server_->listen().ok());
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    if (thread_.joinable()) {
      boost::asio::post(io_, [this] {
        held_.reset();
        io_.stop();
      });
      thread_.join();
    }
  }
  // Runs `f` on the I/O thread and waits for it.
  template <typename F>
  auto on_io(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    boost::asio::post(io_, [&task] { task(); });
    return result.get();
  }

  void handle(HttpRequest r, std::shared_ptr<HttpExchange> exchange) {
    last_target_ = r.target;
    last_method_ = r.method;
    if (r.target == "/full") {
      exchange->respond(200, "text/plain", "body:" + r.body);
    } else if (r.target == "/stream") {
      exchange->start_stream(200, "text/event-stream");
      exchange->send_chunk("data: 1\n\n");
      exchange->send_chunk("data: 2\n\n");
      exchange->end_stream();
    } else if (r.target == "/hold") {
      exchange->on_disconnect([this] { disconnected_ = true; });
      held_ = exchange;
    } else {
      exchange->respond(404, "application/json", "{}");
    }
  }

  boost::asio::io_context io_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  std::shared_ptr<HttpExchange> held_;
  std::atomic<bool> disconnected_{false};
  std::string last_target_, last_method_;  // of the last request (read after its response)
};

TEST_F(HttpServerTest, KeepAliveServesRequestsInTurn) {
  start();
  Client c(server_->port());
  c.send("POST /full HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
  std::string a = c.read_until("body:abc");
  EXPECT_EQ(a.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << a;
  EXPECT_NE(a.find("Content-Length: 8\r\n"), std::string::npos);
  EXPECT_NE(a.find("Connection: keep-alive"), std::string::npos);
  c.send(get("/nothing"));
  EXPECT_EQ(c.read_until("{}").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(on_io([&] { return server_->counters().requests_total; }), 2u);
  EXPECT_EQ(on_io([&] { return server_->counters().responses_4xx; }), 1u);
}

TEST_F(HttpServerTest, StreamIsChunked) {
  start();
  Client c(server_->port());
  c.send(get("/stream"));
  std::string s = c.read_until("0\r\n\r\n");
  EXPECT_NE(s.find("Transfer-Encoding: chunked"), std::string::npos);
  EXPECT_NE(s.find("9\r\ndata: 1\n\n\r\n9\r\ndata: 2\n\n\r\n0\r\n\r\n"), std::string::npos) << s;
}

TEST_F(HttpServerTest, ClientLeavingWhileBusyFiresTheCallbackOnce) {
  start();
  {
    Client c(server_->port());
    c.send(get("/hold"));
    for (int i = 0; i < 200 && !on_io([&] { return held_ != nullptr; }); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_FALSE(disconnected_);
  }
  for (int i = 0; i < 400 && !disconnected_; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(disconnected_);
  // Later calls on the spent exchange are harmless no-ops.
  on_io([&] {
    EXPECT_TRUE(held_->disconnected());
    held_->respond(200, "text/plain", "late");
    return 0;
  });
}

TEST_F(HttpServerTest, OversizedHeaderGets431) {
  HttpServerConfig config;
  config.max_header_bytes = 1024;
  start(config);
  Client c(server_->port());
  c.send("GET /full HTTP/1.1\r\nX-Junk: " + std::string(4096, 'a') + "\r\n\r\n");
  std::string r = c.read_until("}}");
  EXPECT_EQ(r.rfind("HTTP/1.1 431", 0), 0u) << r;
  EXPECT_NE(r.find("\"error\""), std::string::npos);
}

TEST_F(HttpServerTest, OversizedBodyGets413AndTheClientSeesIt) {
  HttpServerConfig config;
  config.max_body_bytes = 1000;
  start(config);
  Client c(server_->port());
  const std::string body(200'000, 'x');
  c.send("POST /full HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         body);
  std::string r = c.read_until("}}");
  EXPECT_EQ(r.rfind("HTTP/1.1 413", 0), 0u) << r.substr(0, 200);
  EXPECT_NE(r.find("Connection: close"), std::string::npos);
}

TEST_F(HttpServerTest, ConnectionsOverTheCapGet503WhenNoneIsIdle) {
  HttpServerConfig config;
  config.max_connections = 2;
  start(config);
  Client a(server_->port()), b(server_->port());
  a.send(get("/hold"));              // busy: its response is in progress
  b.send("GET /full HTTP/1.1\r\n");  // reading: half a header
  while (!on_io([&] { return held_ != nullptr; })) std::this_thread::yield();
  Client c(server_->port());
  std::string r = c.read_until("}}");
  EXPECT_EQ(r.rfind("HTTP/1.1 503", 0), 0u) << r;
  EXPECT_NE(r.find("Retry-After: 1"), std::string::npos) << r;
  EXPECT_TRUE(c.closed_by_peer());
}

// Idle sockets cannot lock everyone out: at the cap, the connection that has waited longest for
// a request is closed to make room for the newcomer.
TEST_F(HttpServerTest, AtTheCapTheLongestIdleConnectionMakesRoom) {
  HttpServerConfig config;
  config.max_connections = 2;
  start(config);
  Client oldest(server_->port());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  Client served(server_->port());
  served.send(get("/full"));
  served.read_until("body:");  // now idle too, but more recently
  Client c(server_->port());
  c.send(get("/full"));
  EXPECT_EQ(c.read_until("body:").rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_TRUE(oldest.closed_by_peer());
  served.send(get("/full"));
  EXPECT_EQ(served.read_until("body:").rfind("HTTP/1.1 200", 0), 0u);
}

TEST_F(HttpServerTest, OneClientAddressOverItsCapGets429OthersAreServed) {
  HttpServerConfig config;
  config.max_connections_per_client = 2;
  start(config);
  Client a(server_->port(), "127.0.0.2"), b(server_->port(), "127.0.0.2");
  while (on_io([&] { return server_->counters().open_connections; }) < 2) std::this_thread::yield();
  Client third(server_->port(), "127.0.0.2");
  std::string r = third.read_until("}}");
  EXPECT_EQ(r.rfind("HTTP/1.1 429", 0), 0u) << r;
  EXPECT_NE(r.find("127.0.0.2"), std::string::npos) << r;
  EXPECT_TRUE(third.closed_by_peer());
  Client other(server_->port(), "127.0.0.3");
  other.send(get("/full"));
  EXPECT_EQ(other.read_until("body:").rfind("HTTP/1.1 200", 0), 0u);
  // A slot freed by the client is its own again.
  a.close();
  while (on_io([&] { return server_->counters().open_connections; }) > 2) std::this_thread::yield();
  Client again(server_->port(), "127.0.0.2");
  again.send(get("/full"));
  EXPECT_EQ(again.read_until("body:").rfind("HTTP/1.1 200", 0), 0u);
}

TEST_F(HttpServerTest, HeadGetsTheHeadersWithoutTheBody) {
  start();
  Client c(server_->port());
  c.send("HEAD /full HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string r = c.read_until("\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Length: 5\r\n"), std::string::npos) << r;  // "body:"
  EXPECT_EQ(r.substr(r.size() - 4), "\r\n\r\n") << r;                  // and nothing after
  EXPECT_EQ(last_method_, "HEAD");
  c.send(get("/full"));  // the connection stays usable
  r = c.read_until("body:");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
}

TEST_F(HttpServerTest, AbsoluteFormTargetIsServedAsItsPath) {
  start();
  Client c(server_->port());
  c.send(get("http://127.0.0.1:8080/full"));
  EXPECT_EQ(c.read_until("body:").rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_EQ(last_target_, "/full");
  c.send(get("HTTP://host?x=1"));
  EXPECT_EQ(c.read_until("{}").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(last_target_, "/?x=1");
}

TEST_F(HttpServerTest, DrainClosesIdleConnectionsAndAnswersNewOnesOnce) {
  start();
  Client c(server_->port());
  c.send(get("/full"));
  c.read_until("body:");
  on_io([&] {
    server_->drain();
    return 0;
  });
  EXPECT_TRUE(c.closed_by_peer());
  // A probe arriving during the drain still gets its answer, then the connection closes.
  Client probe(server_->port());
  probe.send(get("/full"));
  const std::string r = probe.read_until("body:");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  EXPECT_NE(r.find("Connection: close"), std::string::npos) << r;
  EXPECT_TRUE(probe.closed_by_peer());
}

// A socket that never sends a byte is closed after the header timeout, not the (longer)
// keep-alive idle timeout.
TEST_F(HttpServerTest, ConnectionThatSendsNothingClosesAfterTheHeaderTimeout) {
  HttpServerConfig config;
  config.header_timeout = std::chrono::milliseconds(100);
  config.idle_timeout = std::chrono::seconds(60);
  start(config);
  Client c(server_->port());
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.closed_by_peer());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
}

TEST_F(HttpServerTest, KeptAliveConnectionTimesOutAfterTheIdleTimeout) {
  HttpServerConfig config;
  config.idle_timeout = std::chrono::milliseconds(100);
  start(config);
  Client c(server_->port());
  c.send(get("/full"));
  c.read_until("body:");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.closed_by_peer());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
}

}  // namespace
}  // namespace drift::server
