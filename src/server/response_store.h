// The Responses API's stored responses (`store: true`, OpenAI's default): each response's body
// (what GET /v1/responses/{id} returns) and its conversation as Responses items (the input items
// of the whole chain, then its output items), which a request naming it as previous_response_id
// continues. In memory and bounded: at most `max_count` responses and `max_bytes` of them (the
// oldest evicted first), each for `ttl` after it was stored. A response larger than max_bytes
// alone is not kept. Each entry holds its whole chain's items (not a link to its parent), so
// evicting an old response never breaks a newer one that continued it.
//
// Thread-safe: a request's body is read on a prompt worker (which looks up its
// previous_response_id) while responses are stored and fetched on the I/O thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace drift::server {

struct ResponseStoreLimits {
  size_t max_count = 10000;              // --responses-max-count
  size_t max_bytes = size_t{256} << 20;  // --responses-max-mib
  std::chrono::seconds ttl{24 * 3600};   // --responses-ttl
};

struct StoredResponse {
  std::string body;          // the response object's JSON text
  std::string conversation;  // a JSON array of Responses items (input chain + output)
  std::string instructions;  // the response's instructions (not carried to a continuation)
  size_t bytes() const { return body.size() + conversation.size() + instructions.size(); }
};

struct ResponseStoreStats {
  size_t count = 0;
  size_t bytes = 0;
  uint64_t evictions = 0;  // entries dropped for the count or byte cap, or expired
};

class ResponseStore {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ResponseStore(ResponseStoreLimits limits,
                         std::function<Clock::time_point()> now = Clock::now)
      : limits_(limits), now_(std::move(now)) {}

  // Keeps `response` under `id` (replacing one of the same id); false if it alone exceeds
  // max_bytes.
  bool put(const std::string& id, StoredResponse response);
  // nullopt when unknown, evicted or expired.
  std::optional<StoredResponse> get(const std::string& id);
  // false when unknown (or already evicted).
  bool erase(const std::string& id);
  ResponseStoreStats stats();

 private:
  struct Entry {
    std::string id;
    StoredResponse response;
    Clock::time_point stored;
  };
  using List = std::list<Entry>;  // oldest first
  void drop(List::iterator it);
  void evict_expired(Clock::time_point now);  // holds mu_

  const ResponseStoreLimits limits_;
  const std::function<Clock::time_point()> now_;
  std::mutex mu_;
  List entries_;
  std::unordered_map<std::string, List::iterator> by_id_;
  size_t bytes_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace drift::server
