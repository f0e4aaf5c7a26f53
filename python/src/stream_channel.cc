#include "stream_channel.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace drift::python {

Expected<std::shared_ptr<StreamChannel>> StreamChannel::open() {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return make_error("eventfd: {}", std::strerror(errno));
  return std::shared_ptr<StreamChannel>(new StreamChannel(fd));
}

StreamChannel::~StreamChannel() { close(fd_); }

void StreamChannel::push(uint64_t key, TokenEvent event) {
  bool was_empty;
  {
    std::lock_guard lock(mutex_);
    was_empty = queue_.empty();
    queue_.emplace_back(key, std::move(event));
  }
  // One wake-up per batch of events: the reader drains everything queued when it runs. The
  // counter cannot overflow (it is reset by every drain), so the write never blocks.
  if (was_empty) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t written = write(fd_, &one, sizeof(one));
  }
}

std::vector<std::pair<uint64_t, TokenEvent>> StreamChannel::drain() {
  uint64_t count;
  [[maybe_unused]] ssize_t read_bytes = read(fd_, &count, sizeof(count));  // EAGAIN when 0
  std::vector<std::pair<uint64_t, TokenEvent>> events;
  std::lock_guard lock(mutex_);
  events.swap(queue_);
  return events;
}

}  // namespace drift::python
