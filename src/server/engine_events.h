// GET /v1/engine/events: a Server-Sent Event stream of engine snapshots for the /engine page.
// One timer on the I/O thread serves every subscriber: every kPeriod it reads the engine's latest
// snapshot and metrics (copies taken at a step boundary; engine.h) and, when they changed, sends
// each subscriber the same `data: <engine_view_json>` event; while nothing changes a comment line
// every kKeepAlive keeps proxies and the write timeout from closing the stream. Reading is what
// keeps the engine taking snapshots, so with no subscriber the engine takes none.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "server/http_server.h"

namespace drift::server {

class EngineEvents {
 public:
  static constexpr std::chrono::milliseconds kPeriod{250};
  static constexpr std::chrono::seconds kKeepAlive{5};
  // Streams at once; the next subscriber gets 429 (each holds a connection, which the HTTP layer
  // caps as well).
  static constexpr size_t kMaxSubscribers = 64;

  explicit EngineEvents(boost::asio::io_context& io);

  // Starts a stream on `exchange` and sends the current snapshot at once. False (nothing sent)
  // when kMaxSubscribers streams are open.
  bool subscribe(const Engine& engine, std::shared_ptr<HttpExchange> exchange);
  // Ends every stream (the server is draining: its connections must be free to close).
  void end_all();
  size_t subscribers() const { return subscribers_.size(); }

 private:
  void tick();
  void schedule();

  boost::asio::steady_timer timer_;
  const Engine* engine_ = nullptr;
  std::vector<std::shared_ptr<HttpExchange>> subscribers_;
  bool ticking_ = false;
  uint64_t sent_version_ = 0;
  uint64_t sent_finished_ = 0;
  std::chrono::steady_clock::time_point last_sent_{};
};

}  // namespace drift::server
