// The channel between the engine and one request's handle: the engine delivers TokenEvents, the
// handle pulls them (or they go to a callback), and the handle raises the cancel flag.
//
// Two delivery modes, fixed at submit:
//   pull      events queue here; RequestHandle::next() waits on a condition variable.
//   callback  each event is passed to the callback on the thread that delivers it — the engine
//             worker, or the submitting thread for a request rejected at once — in order. The
//             callback must return quickly and must not block (post the event to an event loop),
//             and must not destroy the request's handle. detach() waits for a call in progress
//             and stops later calls, so a callback never runs after its handle is gone. A
//             callback that throws is detached, and the engine cancels its request.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>

#include "engine/request.h"

namespace drift {

using EventCallback = std::function<void(TokenEvent)>;

class RequestStream {
 public:
  // An empty callback selects pull delivery.
  RequestStream(RequestId id, EventCallback callback) : id_(id), callback_(std::move(callback)) {}
  RequestStream(const RequestStream&) = delete;
  RequestStream& operator=(const RequestStream&) = delete;

  RequestId id() const { return id_; }
  bool pull_delivery() const { return !callback_; }

  // ---- Engine side: one deliverer at a time; nothing after the finish event ----
  // False when the callback threw: it is detached and the caller should cancel the request.
  bool deliver(TokenEvent event);

  // ---- Handle side ----
  // The next event, waiting at most `timeout` (forever when absent). nullopt on timeout, once
  // the finish event has been returned, or in callback delivery.
  std::optional<TokenEvent> next(std::optional<std::chrono::nanoseconds> timeout);
  // The finish event has been taken by next() (pull) or passed to the callback.
  bool finished() const;
  // Raises the cancel flag; true the first time.
  bool request_cancel() { return !cancel_requested_.exchange(true, std::memory_order_acq_rel); }
  bool cancel_requested() const { return cancel_requested_.load(std::memory_order_acquire); }
  // No callback runs after this returns (one in progress is waited for).
  void detach();

 private:
  const RequestId id_;
  std::atomic<bool> cancel_requested_{false};

  mutable std::mutex mutex_;  // guards the queue and the flags
  std::condition_variable ready_;
  std::deque<TokenEvent> events_;
  bool finish_taken_ = false;

  std::mutex callback_mutex_;  // held while the callback runs
  const EventCallback callback_;
  bool detached_ = false;
};

}  // namespace drift
