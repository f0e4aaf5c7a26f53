#include "engine/gateway.h"

#include <utility>

namespace drift {

Status Gateway::push(AcceptedRequest& request) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_reason_) return Error{*closed_reason_};
    const int64_t queued = int64_t(requests_.size()) + waiting_in_worker_;
    if (queued >= max_queued_)
      return make_error(
          "overloaded: {} requests are already waiting to be admitted (max_queued_requests is "
          "{}); retry later",
          queued, max_queued_);
    requests_.push_back(std::move(request));
  }
  work_.notify_one();
  return Status::Ok();
}

void Gateway::cancel(std::shared_ptr<RequestStream> stream) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return;
    cancels_.push_back(std::move(stream));
  }
  work_.notify_one();
}

void Gateway::mark_stopped() {
  std::lock_guard<std::mutex> lock(mutex_);
  stopped_ = true;
  cancels_.clear();
}

void Gateway::close(std::string reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!closed_reason_) closed_reason_ = std::move(reason);
}

void Gateway::request_shutdown(ShutdownMode mode) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!closed_reason_) closed_reason_ = "the engine is shutting down";
    if (!shutdown_ || mode == ShutdownMode::kAbort) shutdown_ = mode;
  }
  work_.notify_one();
}

void Gateway::request_prefix_cache_flush() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    flush_prefix_cache_ = true;
  }
  work_.notify_one();
}

void Gateway::take(Intake& intake, bool wait) {
  // Swapping keeps the capacity of both sides' vectors, so a quiet step allocates nothing here.
  intake.requests.clear();
  intake.cancels.clear();
  std::unique_lock<std::mutex> lock(mutex_);
  if (wait) {
    work_.wait(lock, [&] {
      return !requests_.empty() || !cancels_.empty() || shutdown_ || flush_prefix_cache_;
    });
  }
  intake.requests.swap(requests_);
  intake.cancels.swap(cancels_);
  intake.shutdown = shutdown_;
  intake.flush_prefix_cache = std::exchange(flush_prefix_cache_, false);
  waiting_in_worker_ += int32_t(intake.requests.size());
}

void Gateway::set_waiting(int32_t num_waiting) {
  std::lock_guard<std::mutex> lock(mutex_);
  waiting_in_worker_ = num_waiting;
}

int32_t Gateway::num_queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return int32_t(requests_.size());
}

}  // namespace drift
