#include "engine/request_stream.h"

namespace drift {

bool RequestStream::deliver(TokenEvent event) {
  if (callback_) {
    if (event.finish) {  // finished() holds from the moment the callback can see the finish
      std::lock_guard<std::mutex> state(mutex_);
      finish_taken_ = true;
    }
    std::lock_guard<std::mutex> lock(callback_mutex_);
    if (detached_) return true;
    try {
      callback_(std::move(event));
    } catch (...) {
      // The engine thread must survive a consumer's bug; that consumer gets nothing more.
      detached_ = true;
      return !request_cancel();
    }
    return true;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(std::move(event));
  }
  ready_.notify_all();
  return true;
}

std::optional<TokenEvent> RequestStream::next(std::optional<std::chrono::nanoseconds> timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (callback_ || finish_taken_) return std::nullopt;
  auto available = [&] { return !events_.empty(); };
  if (timeout) {
    if (!ready_.wait_for(lock, *timeout, available)) return std::nullopt;
  } else {
    ready_.wait(lock, available);
  }
  TokenEvent event = std::move(events_.front());
  events_.pop_front();
  finish_taken_ = event.finish.has_value();
  return event;
}

bool RequestStream::finished() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return finish_taken_;
}

void RequestStream::detach() {
  if (!callback_) return;
  std::lock_guard<std::mutex> lock(callback_mutex_);
  detached_ = true;
}

}  // namespace drift
