#include "engine/engine_worker.h"

#include <algorithm>
#include <exception>

#include "util/signal_stack.h"

namespace drift {

namespace {

double seconds_between(EngineClock::time_point from, EngineClock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

EngineWorker::EngineWorker(EngineScheduler& scheduler, KVCacheManager& kv, Executor& executor,
                           Gateway& gateway, ProgressLog& log, MetricsBoard& board,
                           SnapshotBoard& snapshots, SessionStore& sessions,
                           const LatencyConfig& latency, const DraftModel* draft_model)
    : scheduler_(scheduler),
      kv_(kv),
      executor_(executor),
      gateway_(gateway),
      log_(log),
      board_(board),
      snapshots_(snapshots),
      sessions_(sessions),
      latency_(latency),
      draft_model_(draft_model) {
  const size_t seqs = size_t(scheduler.config().max_num_seqs);
  live_.reserve(seqs);
  deliveries_.reserve(seqs);
  ids_.reserve(seqs);
  undecodable_.reserve(seqs);
  stopped_.reserve(seqs);
  result_.items.reserve(seqs);
  metrics_.kv_pages_total = kv.num_pages();
  metrics_.kv_page_size = kv.page_size();
  metrics_.kv_page_bytes = kv.layout().bytes_per_page();
  metrics_.kv_pages_free = kv.num_free_pages();
  // Gauges that hold from the start are published before the first step, so that /metrics on a
  // fresh server says what is configured (the prefix cache read 0 until the first request).
  metrics_.prefix_cache_enabled = scheduler.prefix_cache() != nullptr;
  publish_disk_tier();  // what the directory held at start
  board_.publish(metrics_);
  snapshot_.sequences.reserve(seqs);
  snapshot_.recent_steps.reserve(StepHistory::kSteps);
  publish_snapshot();
}

void EngineWorker::run() noexcept {
  ensure_alternate_signal_stack();
  for (;;) {
    try {
      loop();
      return;
    } catch (const std::exception& e) {
      fail_everything(fmt::format("the engine worker failed: {}", e.what()));
    } catch (...) {
      fail_everything("the engine worker failed with an exception of unknown type");
    }
  }
}

void EngineWorker::loop() {
  // Rule: intake, one step, events — and sleep only when no step can make progress.
  bool stepped = false;
  for (;;) {
    const bool busy = healthy() && stepped && scheduler_.has_unfinished();
    gateway_.take(intake_, /*wait=*/!busy);
    admit(intake_.requests);
    apply_cancels(intake_.cancels);
    if (intake_.shutdown == ShutdownMode::kAbort) cancel_all("the engine was shut down");
    if (intake_.shutdown == ShutdownMode::kDrainStarted) cancel_not_started();
    if (intake_.flush_prefix_cache) scheduler_.flush_prefix_cache();

    StepReport report;
    if (healthy() && scheduler_.has_unfinished()) {
      set_step_budget();
      report = run_engine_step(scheduler_, executor_, result_, log_,
                               [this](const StepPlan& plan) { stamp_scheduled(plan); });
      learn_step_cost(report);
      collect(report.outcomes);
      if (!executor_.healthy()) {
        become_unhealthy(report.status.ok() ? std::string("the executor cannot run further steps")
                                            : report.status.message());
      } else if (!report.ran && intake_.shutdown) {
        // Nothing could be scheduled and nothing new can arrive: end what is left.
        cancel_all("the engine was shut down with requests it could not schedule");
      }
    }
    stepped = report.ran;
    gateway_.set_waiting(scheduler_.num_waiting());
    publish_forecast();
    publish(report);
    deliver();
    if (intake_.shutdown && live_.empty()) return;
  }
}

void EngineWorker::admit(std::vector<AcceptedRequest>& requests) {
  // Rule: a taken request enters the scheduler, or ends at once with the reason it cannot.
  const EngineClock::time_point now = EngineClock::now();
  for (AcceptedRequest& request : requests) {
    const RequestId id = request.sequence.request().id;
    const int32_t prompt_tokens = int32_t(request.sequence.request().prompt.size());
    if (!healthy()) {
      log_.record(ProgressEvent::kReject, id, 0, kv_.num_pages());
      reject(request, prompt_tokens, {RejectReason::kUnhealthy, unhealthy_reason_, std::nullopt});
      continue;
    }
    if (request.stream->cancel_requested()) {  // cancelled before the worker saw it
      LiveRequest never_admitted;
      never_admitted.stream = std::move(request.stream);
      never_admitted.output = std::move(request.output);
      never_admitted.submitted = request.submitted;
      never_admitted.prompt_tokens = prompt_tokens;
      never_admitted.session_id = std::move(request.session_id);
      events_.clear();
      finish_live(never_admitted, events_, FinishReason::kCancelled, {}, now);
      continue;
    }
    if (live_.contains(id)) {
      log_.record(ProgressEvent::kReject, id, 0, kv_.num_pages());
      reject(request, prompt_tokens,
             make_rejection(RejectReason::kInvalidRequest,
                            "request id {} is in use by an unfinished request", id));
      continue;
    }
    const int32_t max_new_tokens = request.sequence.request().max_new_tokens;
    scheduler_.add(std::move(request.sequence));  // admitted by the judge: never refused
    LiveRequest& live = live_[id];
    live.stream = std::move(request.stream);
    live.output = std::move(request.output);
    live.submitted = request.submitted;
    live.prompt_tokens = prompt_tokens;
    if (request.session_id) {
      live.session_id = std::move(request.session_id);
      live.turn_tokens.reserve(size_t(max_new_tokens));
    }
  }
}

void EngineWorker::apply_cancels(std::span<const std::shared_ptr<RequestStream>> streams) {
  // Rule: a cancel ends the request in any phase; its pages are free when its event goes out.
  if (streams.empty()) return;
  const EngineClock::time_point now = EngineClock::now();
  for (const std::shared_ptr<RequestStream>& stream : streams) {
    auto it = live_.find(stream->id());
    if (it == live_.end() || it->second.stream != stream) continue;  // finished, or never admitted
    if (std::optional<SequenceOutcome> outcome = scheduler_.cancel(stream->id()))
      collect_one(*outcome, now);
  }
}

void EngineWorker::cancel_all(const std::string& why) {
  // Rule: every live request ends "cancelled" with the cause; nothing is left in the scheduler.
  if (live_.empty()) return;
  ids_.clear();
  for (const auto& [id, live] : live_) ids_.push_back(id);
  const EngineClock::time_point now = EngineClock::now();
  for (RequestId id : ids_) {
    std::optional<SequenceOutcome> outcome = scheduler_.cancel(id);
    if (!outcome) outcome = SequenceOutcome{id, std::nullopt, FinishReason::kCancelled, {}};
    outcome->message = why;
    collect_one(*outcome, now);
  }
}

void EngineWorker::cancel_not_started() {
  ids_.clear();
  scheduler_.waiting_not_started(ids_);
  if (ids_.empty()) return;
  const EngineClock::time_point now = EngineClock::now();
  for (RequestId id : ids_) {
    std::optional<SequenceOutcome> outcome = scheduler_.cancel(id);
    if (!outcome) continue;
    outcome->message = "the server is shutting down and this request had not started; retry it";
    collect_one(*outcome, now);
  }
}

void EngineWorker::set_step_budget() {
  // Rule: the scheduler gets a token budget, never a clock: the largest prefill the latency
  // targets allow beside this step's decodes, by the step cost model.
  BudgetInputs in;
  in.load = scheduler_.load();
  in.max_num_batched_tokens = scheduler_.config().max_num_batched_tokens;
  if (latency_.target_ttft_seconds)
    in.oldest_unserved_seconds = oldest_unserved_seconds(EngineClock::now());
  const int32_t budget = plan_prefill_budget(cost_model_, latency_, in);
  scheduler_.set_prefill_token_budget(budget);
  metrics_.prefill_token_budget = scheduler_.prefill_token_budget();
  // What recomputing a preempted sequence would cost, for the swap-or-recompute choice.
  if (cost_model_.calibrated())
    scheduler_.set_recompute_costs(RecomputeCosts{cost_model_.costs().per_prefill_token,
                                                  cost_model_.costs().per_attended_position});
}

void EngineWorker::learn_step_cost(const StepReport& report) {
  // Rule: every step that ran to its end teaches the model its cost (a failed one says nothing).
  if (!report.ran || !report.status.ok()) return;
  metrics_.last_step_predicted_seconds = cost_model_.predict(report.shape);
  metrics_.last_step_seconds = report.executor_seconds;
  cost_model_.observe(report.shape, report.executor_seconds);
  metrics_.step_costs_calibrated = cost_model_.calibrated();
  metrics_.step_costs = cost_model_.costs();
}

void EngineWorker::publish_forecast() {
  // Rule: submitters predict a new request's time to first token from the prefill still to do
  // and the rate at which the next steps will do it.
  if (!latency_.max_ttft_seconds) return;
  BudgetInputs in;
  in.load = scheduler_.load();
  in.max_num_batched_tokens = scheduler_.config().max_num_batched_tokens;
  const int32_t budget = plan_prefill_budget(cost_model_, latency_, in);
  gateway_.publish_forecast(in.load.pending_prefill_tokens,
                            seconds_per_prefill_token(cost_model_, in.load, budget));
}

double EngineWorker::oldest_unserved_seconds(EngineClock::time_point now) const {
  double oldest = 0;
  for (const auto& [id, live] : live_)
    if (!live.first_token) oldest = std::max(oldest, seconds_between(live.submitted, now));
  return oldest;
}

void EngineWorker::stamp_scheduled(const StepPlan& plan) {
  // Rule: a request's queue time ends with the first step that carries it; the gateway counts
  // only what is still waiting against max_queued_requests.
  gateway_.set_waiting(scheduler_.num_waiting());
  const EngineClock::time_point now = EngineClock::now();
  for (const StepItem& item : plan.items) {
    auto it = live_.find(item.seq_id);
    if (it == live_.end() || it->second.first_scheduled) continue;
    it->second.first_scheduled = now;
    if (const SequenceState* seq = scheduler_.find(item.seq_id))
      it->second.cached_prompt_tokens = seq->first_prefix_hit_tokens;
    metrics_.queue_time.observe(seconds_between(it->second.submitted, now));
  }
}

void EngineWorker::collect(std::span<const SequenceOutcome> outcomes) {
  const EngineClock::time_point now = EngineClock::now();
  undecodable_.clear();
  stopped_.clear();
  for (const SequenceOutcome& outcome : outcomes) collect_one(outcome, now);
  // After the span is done with: ending a sequence changes the scheduler's outcome list.
  for (RequestId id : undecodable_) (void)scheduler_.cancel(id);
  for (RequestId id : stopped_) (void)scheduler_.stop(id);
}

void EngineWorker::collect_one(const SequenceOutcome& outcome, EngineClock::time_point now) {
  // Rule: one outcome gives its token to the request's output processor, and the events that
  // became final go out; a stop string it finds ends the request "stop" here and now.
  auto it = live_.find(outcome.id);
  if (it == live_.end()) return;  // every sequence the scheduler reports is live
  LiveRequest& live = it->second;
  events_.clear();
  std::optional<FinishReason> finish = outcome.finish;
  std::string message = outcome.message;
  if (outcome.token) {
    const TokenId token = *outcome.token;
    ++live.generated;
    ++metrics_.generation_tokens_total;
    if (!live.first_token) {
      live.first_token = now;
      metrics_.time_to_first_token.observe(seconds_between(live.submitted, now));
    } else {
      metrics_.inter_token_latency.observe(seconds_between(live.last_token, now));
    }
    live.last_token = now;
    if (live.session_id) live.turn_tokens.push_back(token);  // reserved: max_new_tokens
    Expected<bool> stopped =
        live.output->push(token, outcome.logprobs, outcome.stop_token, events_);
    if (!stopped.ok()) {
      if (!finish) undecodable_.push_back(outcome.id);
      finish = FinishReason::kError;
      message =
          fmt::format("generated token {} cannot be decoded: {}", token, stopped.error().message);
    } else if (*stopped && !finish) {
      stopped_.push_back(outcome.id);
      finish = FinishReason::kStop;
    }
  }
  if (!outcome.embedding.empty()) {
    if (events_.empty()) events_.emplace_back();
    events_.back().embedding = outcome.embedding;
    ++metrics_.embeddings_total;
    metrics_.embedding_prompt_tokens_total += uint64_t(live.prompt_tokens);
  }
  if (finish) {
    finish_live(live, events_, *finish, std::move(message), now);
    live_.erase(it);
    return;
  }
  deliver_events(live.stream, events_);
}

void EngineWorker::deliver_events(const std::shared_ptr<RequestStream>& stream,
                                  std::vector<TokenEvent>& events) {
  for (TokenEvent& event : events) deliveries_.emplace_back(stream, std::move(event));
  events.clear();
}

void EngineWorker::finish_live(LiveRequest& live, std::vector<TokenEvent>& events,
                               FinishReason reason, std::string message,
                               EngineClock::time_point now) {
  live.output->finish(events);
  // A stop string that the end completed (bytes held back until then) stops a reply cut by
  // max_tokens as well.
  if (reason == FinishReason::kLength && live.output->matched_stop()) reason = FinishReason::kStop;
  Finish finish;
  finish.reason = reason;
  finish.message = std::move(message);
  finish.usage = TokenUsage{live.prompt_tokens, live.generated, live.cached_prompt_tokens};
  if (reason == FinishReason::kStop) finish.stop_string = live.output->matched_stop();
  if (live.first_scheduled)
    finish.timings.queue_seconds = seconds_between(live.submitted, *live.first_scheduled);
  if (live.first_token)
    finish.timings.time_to_first_token_seconds = seconds_between(live.submitted, *live.first_token);
  finish.timings.end_to_end_seconds = seconds_between(live.submitted, now);
  // A turn a stop string ended keeps its tokens up to the stop string (output_processor.h).
  const std::span<const TokenId> turn =
      std::span<const TokenId>(live.turn_tokens)
          .first(std::min(live.turn_tokens.size(), live.output->kept_tokens()));
  end_session_turn(live.session_id, live.stream->id(), turn,
                   reason == FinishReason::kStop || reason == FinishReason::kLength);
  ++metrics_.finished_by_reason[size_t(reason)];
  metrics_.prompt_tokens_total += uint64_t(live.prompt_tokens);
  metrics_.end_to_end.observe(finish.timings.end_to_end_seconds);
  events.back().finish = std::move(finish);
  deliver_events(live.stream, events);
  live.stream.reset();
}

void EngineWorker::end_session_turn(const std::optional<std::string>& session, RequestId id,
                                    std::span<const TokenId> generated, bool completed) {
  // Rule: a turn's end reaches its session before its finish event reaches the caller, so the
  // next turn, submitted after that event, sees the updated history.
  if (session) sessions_.end_turn(*session, id, generated, completed, EngineClock::now());
}

void EngineWorker::reject(AcceptedRequest& request, int32_t prompt_tokens, Rejection why) {
  end_session_turn(request.session_id, request.sequence.request().id, {}, false);
  TokenEvent event;
  Finish finish;
  finish.reason = FinishReason::kRejected;
  finish.reject_reason = why.reason;
  finish.message = std::move(why.message);
  finish.retry_after_seconds = why.retry_after_seconds;
  finish.usage.prompt_tokens = prompt_tokens;
  finish.timings.end_to_end_seconds = seconds_between(request.submitted, EngineClock::now());
  event.finish = std::move(finish);
  ++metrics_.finished_by_reason[size_t(FinishReason::kRejected)];
  deliveries_.emplace_back(std::move(request.stream), std::move(event));
}

void EngineWorker::become_unhealthy(const std::string& why) {
  // Rule: an executor that cannot go on ends every request with the error and takes no more.
  unhealthy_reason_ = fmt::format("the engine is unhealthy: {}", why);
  healthy_.store(false, std::memory_order_release);
  log_.record(ProgressEvent::kError, 0, int64_t(scheduler_.current_step()), -1);
  gateway_.close({RejectReason::kUnhealthy, unhealthy_reason_, std::nullopt});
  collect(scheduler_.abort_all(Error{unhealthy_reason_}));
}

void EngineWorker::fail_everything(const std::string& why) noexcept {
  // Rule: whatever broke, no caller waits forever: every live request gets its finish event.
  // The scheduler is not trusted any more; the worker only answers (and rejects) from now on.
  unhealthy_reason_ = fmt::format("the engine is unhealthy: {}", why);
  healthy_.store(false, std::memory_order_release);
  log_.record(ProgressEvent::kError, 0, int64_t(scheduler_.current_step()), -1);
  gateway_.close({RejectReason::kUnhealthy, unhealthy_reason_, std::nullopt});
  const EngineClock::time_point now = EngineClock::now();
  for (auto& [id, live] : live_) {
    events_.clear();
    finish_live(live, events_, FinishReason::kError, why, now);
  }
  live_.clear();
  metrics_.healthy = false;
  board_.publish(metrics_);
  deliver();
}

void EngineWorker::publish(const StepReport& report) {
  metrics_.healthy = healthy();
  metrics_.num_waiting = scheduler_.num_waiting();
  metrics_.num_running = scheduler_.num_running();
  metrics_.kv_pages_total = kv_.num_pages();
  metrics_.kv_pages_used = kv_.num_used_pages();
  metrics_.kv_pages_free = kv_.num_free_pages();
  metrics_.kv_pages_cached = kv_.num_cached_pages();
  if (report.ran) {
    ++metrics_.steps;
    metrics_.last_step_prefill_tokens = report.prefill_tokens;
    metrics_.last_step_decode_tokens = report.decode_tokens;
    metrics_.prefill_tokens_total += uint64_t(report.prefill_tokens);
    metrics_.decode_tokens_total += uint64_t(report.decode_tokens);
    step_history_.record({metrics_.steps, report.prefill_tokens, report.decode_tokens,
                          report.num_items, report.executor_seconds});
  }
  metrics_.preemptions = scheduler_.capacity_stats().preempted;
  const SchedulerStats& stats = scheduler_.stats();
  metrics_.spec_drafts = stats.spec_drafts;
  metrics_.spec_draft_tokens = stats.spec_draft_tokens;
  metrics_.spec_accepted_tokens = stats.spec_accepted_tokens;
  metrics_.spec_accepted_by_position = stats.spec_accepted_by_position;
  metrics_.spec_pool_draft_tokens = stats.spec_pool_draft_tokens;
  metrics_.spec_pool_accepted_tokens = stats.spec_pool_accepted_tokens;
  metrics_.spec_pool_bytes = scheduler_.ngram_pool().bytes();
  metrics_.spec_forced_draft_tokens = stats.spec_forced_draft_tokens;
  metrics_.spec_forced_accepted_tokens = stats.spec_forced_accepted_tokens;
  metrics_.spec_auto_steps_with_drafts = stats.spec_auto_steps_with_drafts;
  metrics_.spec_auto_steps_without_drafts = stats.spec_auto_steps_without_drafts;
  metrics_.spec_draft_model_draft_tokens = stats.spec_draft_model_draft_tokens;
  metrics_.spec_draft_model_accepted_tokens = stats.spec_draft_model_accepted_tokens;
  if (draft_model_) {
    metrics_.spec_draft_model_steps = draft_model_->steps();
    metrics_.spec_draft_model_seconds = draft_model_->seconds();
    metrics_.spec_draft_model_passes = draft_model_->stats().passes;
    metrics_.spec_draft_model_kv_bytes = draft_model_->kv_bytes();
  }
  if (const PrefixCache* cache = scheduler_.prefix_cache()) {
    metrics_.prefix_cache_enabled = true;
    metrics_.prefix_cache = cache->stats();
  }
  publish_disk_tier();
  board_.publish(metrics_);
  publish_snapshot();
}

void EngineWorker::publish_disk_tier() {
  const PrefixDiskTier* tier = scheduler_.disk_tier();
  if (!tier) return;
  const SchedulerStats& s = scheduler_.stats();
  const PreemptionMetrics preemption{s.preemptions_swapped,         s.preemptions_recomputed,
                                     s.swapped_tails_restored,      s.predicted_swap_seconds,
                                     s.predicted_recompute_seconds, s.last_preemption};
  metrics_.kv_disk = KVDiskMetrics{tier->stats(),      tier->store().stats(), s.tier_waits,
                                   s.room_holds,       s.room_holds_expired,  tier->num_loads(),
                                   preemption};
}

void EngineWorker::publish_snapshot() {
  // Rule: a snapshot only while a reader wants one, at most every kInterval, and always when the
  // engine goes idle; a reader holding the board's lock costs this boundary its snapshot, never
  // a wait.
  const SnapshotBoard::Clock::time_point now = SnapshotBoard::Clock::now();
  if (!snapshots_.due(now, !scheduler_.has_unfinished())) return;
  fill_engine_snapshot(scheduler_, kv_, step_history_, metrics_.steps, snapshot_);
  snapshots_.try_publish(snapshot_, now);
}

void EngineWorker::deliver() {
  // Rule: events go out after the metrics that include them, in outcome order.
  for (auto& [stream, event] : deliveries_) {
    if (!stream->deliver(std::move(event))) gateway_.cancel(stream);
  }
  deliveries_.clear();
}

}  // namespace drift
