#include "engine/gateway.h"

#include <algorithm>
#include <utility>

#include "engine/latency_planner.h"

namespace drift {

std::optional<Rejection> Gateway::push(AcceptedRequest& request) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_reason_) return *closed_reason_;
    const int64_t queued = int64_t(requests_.size()) + waiting_in_worker_;
    if (queued >= max_queued_)
      return Rejection{RejectReason::kOverloaded,
                       fmt::format("overloaded: {} requests are already waiting to be admitted "
                                   "(max_queued_requests is {}); retry later",
                                   queued, max_queued_),
                       1.0};
    const int64_t prompt = int64_t(request.sequence.request().prompt.size());
    const int64_t backlog = backlog_tokens_ + queued_prompt_tokens_;
    if (max_ttft_ && seconds_per_prefill_token_ > 0 && backlog > 0) {
      const double ttft = predict_ttft_seconds(backlog, prompt, seconds_per_prefill_token_);
      if (ttft > *max_ttft_) {
        // Waiting this long drains enough of the backlog (never more than all of it).
        const double retry =
            std::min(ttft - *max_ttft_, double(backlog) * seconds_per_prefill_token_);
        return Rejection{RejectReason::kOverloaded,
                         fmt::format("overloaded: predicted time to first token {:.2f} s exceeds "
                                     "max_ttft {:.2f} s ({} prompt tokens behind {} tokens of "
                                     "prefill); retry in {:.1f} s",
                                     ttft, *max_ttft_, prompt, backlog, retry),
                         retry};
      }
    }
    queued_prompt_tokens_ += prompt;
    requests_.push_back(std::move(request));
  }
  work_.notify_one();
  return std::nullopt;
}

void Gateway::publish_forecast(int64_t backlog_tokens, double seconds_per_prefill_token) {
  std::lock_guard<std::mutex> lock(mutex_);
  backlog_tokens_ = backlog_tokens;
  seconds_per_prefill_token_ = seconds_per_prefill_token;
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

void Gateway::close(Rejection why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!closed_reason_) closed_reason_ = std::move(why);
}

void Gateway::request_shutdown(ShutdownMode mode) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!closed_reason_)
      closed_reason_ =
          Rejection{RejectReason::kShuttingDown, "the engine is shutting down", std::nullopt};
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

void Gateway::wake() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    woken_ = true;
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
      return !requests_.empty() || !cancels_.empty() || shutdown_ || flush_prefix_cache_ || woken_;
    });
  }
  woken_ = false;
  intake.requests.swap(requests_);
  queued_prompt_tokens_ = 0;
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
