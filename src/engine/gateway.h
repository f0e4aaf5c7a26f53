// The engine's intake: a bounded, thread-safe queue of accepted requests and cancels, filled by
// any thread and drained by the worker at step boundaries. Submitting never blocks: when
// max_queued_requests requests are waiting to be admitted, or the engine is closed, push fails
// at once with the reason.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/output_processor.h"
#include "engine/request_stream.h"
#include "scheduler/admitted_request.h"
#include "util/error.h"

namespace drift {

using EngineClock = std::chrono::steady_clock;

// A request that submit accepted: tokenized and admitted by the engine's judge
// (admission_judge.h). The worker hands `sequence` to the scheduler and keeps the rest to deliver
// its events.
struct AcceptedRequest {
  AdmittedRequest sequence;
  std::shared_ptr<RequestStream> stream;
  std::unique_ptr<OutputProcessor> output;
  EngineClock::time_point submitted;
  // The session this request is a turn of (its turn was begun in the session store).
  std::optional<std::string> session_id;
};

// Why the engine refused a request: the kind, a message a user can act on, and for an overload the
// seconds after which a retry is predicted to succeed.
struct Rejection {
  RejectReason reason = RejectReason::kInvalidRequest;
  std::string message;
  std::optional<double> retry_after_seconds;
};

template <typename... Args>
Rejection make_rejection(RejectReason reason, fmt::format_string<Args...> format, Args&&... args) {
  return Rejection{reason, fmt::format(format, std::forward<Args>(args)...), std::nullopt};
}

enum class ShutdownMode : uint8_t {
  kDrain,  // every request accepted so far runs to its end
  // A server's drain: requests that have produced a token run to their end; those still waiting
  // for their first ("cancelled" at once) so that their clients can retry elsewhere now instead
  // of after the drain.
  kDrainStarted,
  kAbort,  // every unfinished request ends with finish reason "cancelled"
};

class Gateway {
 public:
  // `max_ttft_seconds`: predictive admission (see push); nullopt: off.
  explicit Gateway(int32_t max_queued_requests,
                   std::optional<double> max_ttft_seconds = std::nullopt)
      : max_queued_(max_queued_requests), max_ttft_(max_ttft_seconds) {}
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Queues the request, or returns why not (nothing is taken from `request` then): "overloaded"
  // when max_queued_requests requests wait to be admitted, or when the request's predicted time
  // to first token — its prompt behind the prefill backlog, at the worker's forecast rate —
  // exceeds max_ttft_seconds (only when there is a backlog: a retry could not help an idle
  // engine), with the predicted wait as retry time; or the reason the gateway is closed.
  std::optional<Rejection> push(AcceptedRequest& request);
  // Queues a cancel of the request behind `stream` for the worker (ignored there if it has
  // finished). The stream, not the id, names the request: ids given by callers may repeat.
  // Ignored once the worker has stopped.
  void cancel(std::shared_ptr<RequestStream> stream);
  // Refuses later pushes with `why` (the first one given sticks).
  void close(Rejection why);
  // The worker has exited: nothing will take cancels any more.
  void mark_stopped();
  // Closes (reason "the engine is shutting down") and tells the worker to stop; a later
  // kAbort escalates an earlier kDrain.
  void request_shutdown(ShutdownMode mode);
  // Asks the worker to evict every cached KV page at its next step boundary.
  void request_prefix_cache_flush();
  // Wakes a sleeping worker for one more step (a KV page read from disk finished: a waiting
  // request may now be admitted). Any thread.
  void wake();

  // What the worker takes at a step boundary.
  struct Intake {
    std::vector<AcceptedRequest> requests;
    std::vector<std::shared_ptr<RequestStream>> cancels;
    std::optional<ShutdownMode> shutdown;  // sticky once requested
    bool flush_prefix_cache = false;       // requested since the last take
  };
  // Worker: replaces `intake` with everything queued since the last take. With `wait`, first
  // sleeps until something is queued or a shutdown is requested.
  void take(Intake& intake, bool wait);
  // Worker: how many taken requests are still not admitted (the scheduler's waiting queue); they
  // count against max_queued_requests with those not taken yet.
  void set_waiting(int32_t num_waiting);

  // Worker: the prefill tokens not computed yet in the scheduler, and the seconds per prefill
  // token at the current load (0: not known yet, predictive admission stays off).
  void publish_forecast(int64_t backlog_tokens, double seconds_per_prefill_token);

  int32_t num_queued() const;  // not taken yet

 private:
  const int32_t max_queued_;
  const std::optional<double> max_ttft_;
  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::vector<AcceptedRequest> requests_;
  std::vector<std::shared_ptr<RequestStream>> cancels_;
  bool stopped_ = false;
  int32_t waiting_in_worker_ = 0;
  int64_t queued_prompt_tokens_ = 0;  // of requests_ (not taken yet)
  int64_t backlog_tokens_ = 0;        // publish_forecast
  double seconds_per_prefill_token_ = 0;
  std::optional<Rejection> closed_reason_;
  std::optional<ShutdownMode> shutdown_;
  bool flush_prefix_cache_ = false;
  bool woken_ = false;  // wake() since the last take
};

}  // namespace drift
