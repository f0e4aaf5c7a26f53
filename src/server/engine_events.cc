#include "server/engine_events.h"

#include <algorithm>
#include <boost/asio/io_context.hpp>

#include "server/engine_view_json.h"
#include "server/sse.h"

namespace drift::server {

EngineEvents::EngineEvents(boost::asio::io_context& io) : timer_(io) {}

bool EngineEvents::subscribe(const Engine& engine, std::shared_ptr<HttpExchange> exchange) {
  if (subscribers_.size() >= kMaxSubscribers) return false;
  engine_ = &engine;
  exchange->start_stream(200, "text/event-stream");
  const EngineSnapshot snapshot = engine.snapshot();
  exchange->send_chunk(
      sse_event(engine_view_json(snapshot, engine.metrics(), engine.setup().kv_layout.page_size)));
  subscribers_.push_back(std::move(exchange));
  if (!ticking_) {
    ticking_ = true;
    schedule();
  }
  return true;
}

void EngineEvents::end_all() {
  for (const std::shared_ptr<HttpExchange>& exchange : subscribers_) exchange->end_stream();
  subscribers_.clear();
  timer_.cancel();
  ticking_ = false;
}

void EngineEvents::schedule() {
  timer_.expires_after(kPeriod);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !ticking_) return;
    tick();
  });
}

void EngineEvents::tick() {
  // Rule: one snapshot read and one JSON text per tick, whatever the number of subscribers; a
  // gone client is dropped here (its disconnect needs no callback of its own).
  std::erase_if(subscribers_, [](const auto& exchange) { return exchange->disconnected(); });
  if (subscribers_.empty() || !engine_) {
    ticking_ = false;
    return;
  }
  const EngineSnapshot snapshot = engine_->snapshot();
  const EngineMetrics metrics = engine_->metrics();
  const auto now = std::chrono::steady_clock::now();
  const bool changed =
      snapshot.version != sent_version_ || metrics.finished_total() != sent_finished_;
  if (changed) {
    const std::string event =
        sse_event(engine_view_json(snapshot, metrics, engine_->setup().kv_layout.page_size));
    for (const auto& exchange : subscribers_) exchange->send_chunk(event);
    sent_version_ = snapshot.version;
    sent_finished_ = metrics.finished_total();
    last_sent_ = now;
  } else if (now - last_sent_ >= kKeepAlive) {
    for (const auto& exchange : subscribers_) exchange->send_chunk(": keep-alive\n\n");
    last_sent_ = now;
  }
  schedule();
}

}  // namespace drift::server
