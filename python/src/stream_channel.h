// Hands token events from the engine's worker thread to an asyncio event loop without the GIL:
// the worker appends (key, event) to a queue and signals an eventfd, which the loop watches
// (loop.add_reader); the loop then drains the queue. The worker never waits on Python, so a
// Python thread holding the GIL cannot stall an engine step.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/request.h"
#include "util/error.h"

namespace drift::python {

class StreamChannel {
 public:
  // Opens the eventfd (non-blocking, close-on-exec).
  static Expected<std::shared_ptr<StreamChannel>> open();
  ~StreamChannel();
  StreamChannel(const StreamChannel&) = delete;
  StreamChannel& operator=(const StreamChannel&) = delete;

  // Readable while events wait (it may also be readable with none, after a drain raced a push).
  int fd() const { return fd_; }

  // Any thread: queues the event of request `key` and wakes the reader.
  void push(uint64_t key, TokenEvent event);
  // The reader: every queued event in arrival order (each request's in its own order).
  std::vector<std::pair<uint64_t, TokenEvent>> drain();

 private:
  explicit StreamChannel(int fd) : fd_(fd) {}

  const int fd_;
  std::mutex mutex_;  // guards queue_
  std::vector<std::pair<uint64_t, TokenEvent>> queue_;
};

}  // namespace drift::python
