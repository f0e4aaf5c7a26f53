#include "kv_events/kv_event_queue.h"

#include <algorithm>

namespace drift {

KVEventQueue::KVEventQueue(int32_t capacity, int32_t page_size)
    : capacity_(std::max(capacity, 1)),
      page_size_(std::max(page_size, 1)),
      slots_(size_t(capacity_)),
      lengths_(size_t(capacity_), 0),
      tokens_(size_t(capacity_) * size_t(page_size_), 0) {}

bool KVEventQueue::push(KVEventKind kind, uint64_t hash, std::optional<uint64_t> parent_hash,
                        std::span<const TokenId> tokens, KVMedium medium) {
  {
    std::lock_guard lock(mutex_);
    if (size_ == size_t(capacity_) || tokens.size() > size_t(page_size_)) {
      ++dropped_;
      return false;
    }
    const size_t slot = (head_ + size_) % size_t(capacity_);
    slots_[slot] = KVEvent{.kind = kind,
                           .hash = hash,
                           .has_parent = parent_hash.has_value(),
                           .parent_hash = parent_hash.value_or(0),
                           .tokens = {},
                           .medium = medium};
    lengths_[slot] = int32_t(tokens.size());
    std::ranges::copy(tokens, tokens_.begin() + std::ptrdiff_t(slot * size_t(page_size_)));
    ++size_;
    ++pushed_;
  }
  ready_.notify_one();
  return true;
}

size_t KVEventQueue::pop(KVEventBatch& out, size_t max_events, std::chrono::milliseconds timeout) {
  out.events.clear();
  out.tokens.clear();
  std::unique_lock lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return size_ > 0 || woken_; });
  woken_ = false;
  const size_t n = std::min(size_, max_events);
  out.tokens.resize(n * size_t(page_size_));
  out.events.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t slot = (head_ + i) % size_t(capacity_);
    const auto begin = tokens_.begin() + std::ptrdiff_t(slot * size_t(page_size_));
    TokenId* dst = out.tokens.data() + i * size_t(page_size_);
    std::copy(begin, begin + lengths_[slot], dst);
    KVEvent e = slots_[slot];
    e.tokens = std::span<const TokenId>(dst, size_t(lengths_[slot]));
    out.events.push_back(e);
  }
  head_ = (head_ + n) % size_t(capacity_);
  size_ -= n;
  return n;
}

void KVEventQueue::wake() {
  {
    std::lock_guard lock(mutex_);
    woken_ = true;
  }
  ready_.notify_all();
}

uint64_t KVEventQueue::pushed() const {
  std::lock_guard lock(mutex_);
  return pushed_;
}

uint64_t KVEventQueue::dropped() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

}  // namespace drift
