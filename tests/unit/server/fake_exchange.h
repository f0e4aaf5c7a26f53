// An HttpExchange that records the response, and a loop that runs an io_context until it has one:
// the OpenAI layer tested without sockets.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_server.h"

namespace drift::server {

class FakeExchange final : public HttpExchange {
 public:
  void respond(int status, std::string_view content_type, std::string body,
               const Headers& headers) override {
    this->status = status;
    this->content_type = content_type;
    this->body = std::move(body);
    this->headers = headers;
    ended = true;
  }
  void start_stream(int status, std::string_view content_type) override {
    this->status = status;
    this->content_type = content_type;
  }
  void send_chunk(std::string data) override { chunks.push_back(std::move(data)); }
  void end_stream() override { ended = true; }
  void on_disconnect(std::function<void()> callback) override { disconnect = std::move(callback); }
  bool disconnected() const override { return false; }

  nlohmann::json json() const { return nlohmann::json::parse(body); }
  std::string header(std::string_view name) const {
    for (const auto& [key, value] : headers)
      if (key == name) return value;
    return {};
  }
  // The error's "param" (null when none).
  nlohmann::json error_param() const { return json()["error"]["param"]; }

  int status = 0;
  std::string content_type;
  std::string body;
  Headers headers;
  std::vector<std::string> chunks;
  bool ended = false;
  std::function<void()> disconnect;
};

// The JSON of every SSE frame's data line in a stream's chunks (a chunk may hold several frames),
// with the frame's `event:` name when it has one ("" else); "data: [DONE]" is skipped.
struct SseFrame {
  std::string event;
  nlohmann::json data;
};
inline std::vector<SseFrame> sse_frames(const FakeExchange& exchange) {
  std::vector<SseFrame> out;
  for (const std::string& chunk : exchange.chunks) {
    size_t at = 0;
    while (at < chunk.size()) {
      size_t end = chunk.find("\n\n", at);
      if (end == std::string::npos) end = chunk.size();
      std::string_view frame = std::string_view(chunk).substr(at, end - at);
      at = end + 2;
      SseFrame f;
      if (frame.starts_with("event: ")) {
        const size_t newline = frame.find('\n');
        f.event = std::string(frame.substr(7, newline - 7));
        frame.remove_prefix(newline == std::string_view::npos ? frame.size() : newline + 1);
      }
      if (!frame.starts_with("data: ") || frame == "data: [DONE]") continue;
      f.data = nlohmann::json::parse(frame.substr(6));
      out.push_back(std::move(f));
    }
  }
  return out;
}

// Runs `io` until `exchange` has its whole response (engine events arrive by post), or 10 s.
inline bool run_until_answered(boost::asio::io_context& io, const FakeExchange& exchange) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!exchange.ended && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(5));
  }
  return exchange.ended;
}

}  // namespace drift::server
