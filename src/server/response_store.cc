#include "server/response_store.h"

namespace drift::server {

void ResponseStore::drop(List::iterator it) {
  bytes_ -= it->response.bytes();
  by_id_.erase(it->id);
  entries_.erase(it);
}

void ResponseStore::evict_expired(Clock::time_point now) {
  // Entries are in the order they were stored, so the expired ones are at the front.
  while (!entries_.empty() && now - entries_.front().stored >= limits_.ttl) {
    drop(entries_.begin());
    ++evictions_;
  }
}

bool ResponseStore::put(const std::string& id, StoredResponse response) {
  const size_t bytes = response.bytes();
  std::lock_guard lock(mu_);
  const Clock::time_point now = now_();
  evict_expired(now);
  if (auto it = by_id_.find(id); it != by_id_.end()) drop(it->second);
  if (bytes > limits_.max_bytes || limits_.max_count == 0) return false;
  while (!entries_.empty() &&
         (entries_.size() + 1 > limits_.max_count || bytes_ + bytes > limits_.max_bytes)) {
    drop(entries_.begin());
    ++evictions_;
  }
  entries_.push_back(Entry{id, std::move(response), now});
  by_id_[id] = std::prev(entries_.end());
  bytes_ += bytes;
  return true;
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) {
  std::lock_guard lock(mu_);
  evict_expired(now_());
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  return it->second->response;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mu_);
  evict_expired(now_());
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  drop(it->second);
  return true;
}

ResponseStoreStats ResponseStore::stats() {
  std::lock_guard lock(mu_);
  evict_expired(now_());
  return {entries_.size(), bytes_, evictions_};
}

}  // namespace drift::server
