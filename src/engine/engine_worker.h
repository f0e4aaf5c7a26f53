// The engine's worker thread: exactly the loop of scheduler/engine_scheduler.h, with the gateway
// as its intake and request streams as its output.
//
//   take intake (sleep on the gateway's condition variable when there is nothing to run)
//   → admit new requests, apply cancels (and, on shutdown(abort), cancel everything)
//   → plan the step's prefill token budget from the step cost model and the latency targets
//   → run_engine_step: schedule_step, executor.run, on_step_executed      [allocation-free]
//   → teach the cost model the step's time
//   → turn outcomes into events (output_processor.h: detokenize, reply format, stop strings;
//     then usage, timings), publish the forecast (for
//     predictive admission), the metrics and (while a live view reads them) a snapshot,
//     deliver events
//   → if the executor reports itself unhealthy: end every request with an error, refuse new ones
//
// It is the only thread that touches the scheduler, the KV cache manager and the executor. The
// compute pool lives inside the executor, with this thread as its worker 0.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/draft_model.h"
#include "engine/engine_metrics.h"
#include "engine/engine_snapshot.h"
#include "engine/engine_step.h"
#include "engine/gateway.h"
#include "engine/latency_planner.h"
#include "engine/metrics_board.h"
#include "engine/session_store.h"
#include "engine/snapshot_board.h"
#include "kv/kv_cache_manager.h"
#include "scheduler/engine_scheduler.h"
#include "scheduler/executor.h"
#include "util/progress_log.h"

namespace drift {

class EngineWorker {
 public:
  // Everything must outlive the worker.
  EngineWorker(EngineScheduler& scheduler, KVCacheManager& kv, Executor& executor, Gateway& gateway,
               ProgressLog& log, MetricsBoard& board, SnapshotBoard& snapshots,
               SessionStore& sessions, const LatencyConfig& latency,
               const DraftModel* draft_model = nullptr);

  // The loop; returns once a shutdown has been requested and no request is left. An unexpected
  // exception in the loop ends every request with an error and leaves the engine unhealthy (it
  // still answers every later request, with a rejection, until shut down).
  void run() noexcept;

  bool healthy() const { return healthy_.load(std::memory_order_acquire); }

 private:
  // One request between its admission and its finish event.
  struct LiveRequest {
    std::shared_ptr<RequestStream> stream;
    std::unique_ptr<OutputProcessor> output;
    EngineClock::time_point submitted;
    std::optional<EngineClock::time_point> first_scheduled;
    std::optional<EngineClock::time_point> first_token;
    EngineClock::time_point last_token;
    int32_t prompt_tokens = 0;
    int32_t generated = 0;
    int32_t cached_prompt_tokens = 0;  // the scheduler's prefix hit at first admission
    // A session turn: the session, and the tokens generated so far (for its history).
    std::optional<std::string> session_id;
    std::vector<TokenId> turn_tokens;
  };

  // Returns on shutdown; throws only on a bug or exhausted memory.
  void loop();
  void admit(std::vector<AcceptedRequest>& requests);
  void apply_cancels(std::span<const std::shared_ptr<RequestStream>> streams);
  void cancel_all(const std::string& why);
  // kDrainStarted: every waiting request that has not produced a token ends "cancelled".
  void cancel_not_started();
  void set_step_budget();
  void learn_step_cost(const StepReport& report);
  void publish_forecast();
  double oldest_unserved_seconds(EngineClock::time_point now) const;
  void stamp_scheduled(const StepPlan& plan);
  void collect(std::span<const SequenceOutcome> outcomes);
  void collect_one(const SequenceOutcome& outcome, EngineClock::time_point now);
  // Ends the request: its held-back output, then the finish, go out after `events` (its events
  // of this step, which this empties).
  void finish_live(LiveRequest& request, std::vector<TokenEvent>& events, FinishReason reason,
                   std::string message, EngineClock::time_point now);
  void deliver_events(const std::shared_ptr<RequestStream>& stream,
                      std::vector<TokenEvent>& events);
  void reject(AcceptedRequest& request, int32_t prompt_tokens, Rejection why);
  void end_session_turn(const std::optional<std::string>& session, RequestId id,
                        std::span<const TokenId> generated, bool completed);
  void become_unhealthy(const std::string& why);
  void fail_everything(const std::string& why) noexcept;
  void publish(const StepReport& report);
  // The disk tier's counters into metrics_ (none without a tier).
  void publish_disk_tier();
  // The live view's snapshot, when the board wants one (snapshot_board.h).
  void publish_snapshot();
  void deliver();

  EngineScheduler& scheduler_;
  KVCacheManager& kv_;
  Executor& executor_;
  Gateway& gateway_;
  ProgressLog& log_;
  MetricsBoard& board_;
  SnapshotBoard& snapshots_;
  SessionStore& sessions_;
  const LatencyConfig latency_;
  const DraftModel* draft_model_;  // null: none (its counts for /metrics)
  StepCostModel cost_model_;       // one per engine: one model, one thread count
  std::atomic<bool> healthy_{true};
  std::string unhealthy_reason_;  // set before healthy_ turns false

  std::unordered_map<RequestId, LiveRequest> live_;  // every request the scheduler holds
  Gateway::Intake intake_;
  ExecutionResult result_;
  EngineMetrics metrics_;  // this thread's copy, published after each step
  StepHistory step_history_;
  EngineSnapshot snapshot_;  // filled here, swapped with the board's published one
  std::vector<std::pair<std::shared_ptr<RequestStream>, TokenEvent>> deliveries_;
  std::vector<RequestId> ids_;          // scratch
  std::vector<RequestId> undecodable_;  // ended by a token the codec cannot decode
  std::vector<RequestId> stopped_;      // ended by a stop string, still in the scheduler
  std::vector<TokenEvent> events_;      // scratch: one request's events of one outcome
};

}  // namespace drift
