#include "py_engine.h"

#include <nanobind/stl/string.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "py_conversion.h"
#include "runtime/engine_options.h"
#include "runtime/load_engine.h"

namespace nb = nanobind;

namespace drift::python {

namespace {

// Refusals caused by what the caller asked for, which Python reports as ValueError.
bool is_invalid_input(RejectReason reason) {
  switch (reason) {
    case RejectReason::kInvalidRequest:
    case RejectReason::kPriorityNotScheduled:
    case RejectReason::kInvalidPrompt:
    case RejectReason::kInvalidGrammar:
    case RejectReason::kInvalidLogitBias:
    case RejectReason::kInvalidStop:
    case RejectReason::kEmptyPrompt:
    case RejectReason::kTokenOutsideVocabulary:
    case RejectReason::kPromptTooLong:
    case RejectReason::kMaxTokensTooLong:
    case RejectReason::kExceedsKvCache:
    case RejectReason::kChatTemplateRefused:  // the template's raise_exception: the conversation
      return true;
    case RejectReason::kChatTemplateFailed:  // the template itself is broken: not the caller's
    case RejectReason::kSessionBusy:
    case RejectReason::kSessionLimit:
    case RejectReason::kOverloaded:
    case RejectReason::kShuttingDown:
    case RejectReason::kUnhealthy:
      return false;
  }
  return false;
}

// A prompt the engine cannot tokenize raises as the engine would reject it: the caller's input
// (ValueError), or a broken chat template (EngineError, the server's 500).
[[noreturn]] void raise_prompt_error(const Error& error) {
  if (is_invalid_input(reject_reason_for_prompt(error)))
    throw nb::value_error(error.message.c_str());
  throw EngineError(error.message);
}

// How long a batch waits, GIL released, between checks for Ctrl-C.
constexpr auto kSignalCheckInterval = std::chrono::milliseconds(100);

}  // namespace

void raise_if_failed(const Finish& finish) {
  if (finish.reason == FinishReason::kRejected) {
    if (finish.reject_reason && is_invalid_input(*finish.reject_reason))
      throw nb::value_error(finish.message.c_str());
    throw EngineError(finish.message);
  }
  if (finish.reason == FinishReason::kError) throw EngineError(finish.message);
}

PyEngine::PyEngine(const std::string& model_path, const nb::dict& options,
                   std::optional<std::string> chat_template) {
  const EngineOptions engine_options = engine_options_from(options);
  Expected<EngineConfig> config = to_engine_config(engine_options);
  if (!config.ok()) throw nb::value_error(config.error().message.c_str());
  ModelLoadOptions load;
  load.chat_template = std::move(chat_template);
  Expected<LoadedModel> model = [&] {
    nb::gil_scoped_release release;  // loading maps and repacks the weights
    return load_model(model_path, load);
  }();
  if (!model.ok()) throw EngineError(model.error().message);
  // The file is a model drift runs: what fails now is the configuration asked for.
  Expected<std::unique_ptr<Engine>> started = [&] {
    nb::gil_scoped_release release;
    return start_engine(*model, *config, {}, engine_options.kv_events);
  }();
  if (!started.ok()) throw nb::value_error(started.error().message.c_str());
  engine_ = std::move(*started);
}

Engine& PyEngine::engine() const {
  if (!engine_) throw EngineError("the engine was shut down");
  return *engine_;
}

std::vector<BatchOutcome> PyEngine::run_batch(std::vector<Request> requests) {
  Engine& e = engine();
  const size_t n = requests.size();
  std::vector<BatchOutcome> outcomes(n);
  // The prompts as the engine will run them (a prompt it cannot tokenize raises here).
  for (size_t i = 0; i < n; ++i) {
    Expected<std::vector<TokenId>> ids = e.tokenize(requests[i].prompt);
    if (!ids.ok()) raise_prompt_error(ids.error());
    outcomes[i].prompt_token_ids = std::move(*ids);
  }

  // Filled by the engine's worker through the callbacks; read here under the same lock.
  std::mutex mutex;
  std::condition_variable finished_one;
  std::vector<bool> done(n, false);
  size_t finished = 0;
  std::vector<RequestHandle> handles;
  handles.reserve(n);
  const size_t max_in_flight = size_t(e.setup().max_queued_requests);
  std::optional<Finish> failure;
  {
    nb::gil_scoped_release release;
    size_t submitted = 0;
    while (true) {
      // Refill: one that finishes makes room for the next, so the queue never overflows.
      while (submitted < n && !failure) {
        {
          std::lock_guard lock(mutex);
          if (submitted - finished >= max_in_flight) break;
        }
        const size_t i = submitted++;
        handles.push_back(e.submit(std::move(requests[i]), [&, i](TokenEvent event) {
          std::lock_guard lock(mutex);
          BatchOutcome& o = outcomes[i];
          if (event.token) o.token_ids.push_back(*event.token);
          o.text += event.text;
          if (event.finish) {
            o.finish = std::move(*event.finish);
            done[i] = true;
            ++finished;
            finished_one.notify_one();
          }
        }));
        std::lock_guard lock(mutex);
        if (done[i] && (outcomes[i].finish.reason == FinishReason::kRejected ||
                        outcomes[i].finish.reason == FinishReason::kError))
          failure = outcomes[i].finish;
      }
      std::unique_lock lock(mutex);
      if (failure || finished == n) break;
      finished_one.wait_for(lock, kSignalCheckInterval);
      if (finished == n) break;
      lock.unlock();
      nb::gil_scoped_acquire acquire;
      if (PyErr_CheckSignals() != 0) {
        handles.clear();  // cancels the batch
        throw nb::python_error();
      }
    }
    handles.clear();  // cancels what still runs (after a failure); waits for callbacks
  }
  if (failure) raise_if_failed(*failure);
  for (const BatchOutcome& o : outcomes) raise_if_failed(o.finish);
  return outcomes;
}

StreamHandle PyEngine::submit_stream(Request request, std::shared_ptr<StreamChannel> channel,
                                     uint64_t key) {
  Engine& e = engine();
  // The callback runs on the worker thread and only queues: it never takes the GIL.
  return StreamHandle(e.submit(std::move(request), [channel, key](TokenEvent event) {
    channel->push(key, std::move(event));
  }));
}

std::vector<TokenId> PyEngine::tokenize(Prompt prompt) const {
  Expected<std::vector<TokenId>> ids = engine().tokenize(std::move(prompt));
  if (!ids.ok()) raise_prompt_error(ids.error());
  return std::move(*ids);
}

std::string PyEngine::detokenize(const std::vector<TokenId>& ids, bool render_special) const {
  Expected<std::string> text = engine().detokenize(ids, render_special);
  if (!text.ok()) throw nb::value_error(text.error().message.c_str());
  return std::move(*text);
}

nb::dict PyEngine::stats() const {
  const EngineMetrics m = engine().metrics();
  nb::dict d;
  d["healthy"] = m.healthy;
  d["num_running"] = m.num_running;
  d["num_waiting"] = m.num_waiting;
  d["kv_pages_total"] = m.kv_pages_total;
  d["kv_pages_used"] = m.kv_pages_used;
  d["kv_pages_free"] = m.kv_pages_free;
  d["kv_pages_cached"] = m.kv_pages_cached;
  d["steps"] = m.steps;
  d["prefill_tokens_total"] = m.prefill_tokens_total;
  d["decode_tokens_total"] = m.decode_tokens_total;
  d["preemptions"] = m.preemptions;
  d["spec_drafts"] = m.spec_drafts;
  d["spec_draft_tokens"] = m.spec_draft_tokens;
  d["spec_accepted_tokens"] = m.spec_accepted_tokens;
  d["spec_pool_draft_tokens"] = m.spec_pool_draft_tokens;
  d["spec_draft_model_draft_tokens"] = m.spec_draft_model_draft_tokens;
  d["spec_draft_model_accepted_tokens"] = m.spec_draft_model_accepted_tokens;
  d["spec_pool_accepted_tokens"] = m.spec_pool_accepted_tokens;
  d["spec_pool_bytes"] = m.spec_pool_bytes;
  d["spec_forced_draft_tokens"] = m.spec_forced_draft_tokens;
  d["spec_forced_accepted_tokens"] = m.spec_forced_accepted_tokens;
  d["prompt_tokens_total"] = m.prompt_tokens_total;
  d["generation_tokens_total"] = m.generation_tokens_total;
  d["prefix_cache_queries"] = m.prefix_cache.queries;
  d["prefix_cache_hits"] = m.prefix_cache.hits;
  d["prefix_cache_queried_tokens"] = m.prefix_cache.queried_tokens;
  d["prefix_cache_hit_tokens"] = m.prefix_cache.hit_tokens;
  d["prefix_cache_evictions"] = m.prefix_cache.evictions;
  if (m.kv_events) {
    d["kv_events_total"] = m.kv_events->events;
    d["kv_events_dropped"] = m.kv_events->dropped;
    d["kv_event_batches"] = m.kv_events->batches;
  }
  nb::dict by_reason;
  for (FinishReason r : {FinishReason::kStop, FinishReason::kLength, FinishReason::kCancelled,
                         FinishReason::kError, FinishReason::kRejected})
    by_reason[nb::str(std::string(finish_reason_name(r)).c_str())] = m.finished(r);
  d["finished"] = by_reason;
  return d;
}

void PyEngine::shutdown() {
  if (!engine_) return;
  nb::gil_scoped_release release;
  engine_->shutdown(ShutdownMode::kAbort);
  engine_.reset();
}

}  // namespace drift::python
