// The serving engine: many concurrent requests over one model, continuously batched. It composes
// the Gateway (intake), the EngineScheduler with its KV cache manager, an Executor and a text
// codec, and runs them on one worker thread (engine_worker.h).
//
//   auto engine = load_engine("model.gguf", config);  // runtime/; or Engine::create(...) with
//   fakes RequestHandle h = (*engine)->submit(request);              // from any thread while (auto
//   event = h.next()) { ... event->text ... }      // or submit(request, callback) h.cancel(); //
//   at any point; ~RequestHandle too
//   (*engine)->shutdown(ShutdownMode::kDrain);
//
// Errors reach the caller as events: submit always returns a handle, and a request that cannot
// run ends with a single event, finish reason kRejected, a RejectReason (request.h) and a message
// with the sizes: kOverloaded when max_queued_requests are waiting or the predicted wait is too
// long (with a retry time; a server answers 429), kPromptTooLong / kMaxTokensTooLong /
// kExceedsKvCache / kTokenOutsideVocabulary / ... for a request that can never run (400),
// kShuttingDown / kUnhealthy once closed (503). An immediate rejection is decided on the
// submitting thread: its event is queued (or passed to the callback) before submit returns.
//
// The engine alone shapes a prompt: it tokenizes text and conversations (with its TextCodec) and
// decides whether a turn gets BOS; its judge (admission_judge.h) alone checks token ids, context
// and KV limits, and admits what the scheduler runs. Programs ask it for tokenize/detokenize too,
// so they never build a second tokenizer.
//
// A server attaches by submitting with a callback that posts each TokenEvent to its own event
// loop (the callback runs on the engine's worker thread, so it must only hand the event over; see
// request_stream.h), and by destroying the handle when the client goes away, which cancels the
// request. The engine thread never touches I/O.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/admission_judge.h"
#include "engine/draft_model.h"
#include "engine/engine_config.h"
#include "engine/engine_metrics.h"
#include "engine/gateway.h"
#include "engine/metrics_board.h"
#include "engine/request.h"
#include "engine/request_handle.h"
#include "engine/session_store.h"
#include "engine/snapshot_board.h"
#include "engine/text_codec.h"
#include "kv/kv_cache_manager.h"
#include "kv/kv_disk_store.h"
#include "kv/prefix_cache.h"
#include "kv/prefix_disk_tier.h"
#include "scheduler/capacity_scheduler.h"
#include "scheduler/engine_scheduler.h"
#include "scheduler/executor.h"
#include "util/error.h"
#include "util/function_ref.h"
#include "util/progress_log.h"

namespace drift {

class EngineWorker;

class Engine {
 public:
  // Builds the executor for the resolved setup (KV pages, page size, batch limits, context).
  using ExecutorFactory = FunctionRef<Expected<std::unique_ptr<Executor>>(const EngineSetup&)>;

  // Validates `config` against `model` (errors name the field), sizes the KV cache, builds the
  // executor with `make_executor`, installs the progress-log crash handler and starts the
  // worker. `executor_resources` (e.g. the loaded weights) is kept alive until the executor is
  // destroyed; the engine never looks inside it. `kv_events`, when given, hears every change to
  // the prefix cache's set of page hashes (kv/kv_event_sink.h; with prefix caching off it hears
  // nothing) and its counts go into metrics(). Programs get an engine for a GGUF file from the
  // composition root (runtime/load_engine.h); tests pass fakes. `draft`, when given, is the
  // draft model of speculative decoding (engine/draft_model.h; SpecMode::kDraft needs one).
  static Expected<std::unique_ptr<Engine>> create(
      const EngineConfig& config, const ModelFacts& model, std::shared_ptr<const TextCodec> codec,
      ExecutorFactory make_executor, std::shared_ptr<const void> executor_resources = {},
      std::shared_ptr<KVEventSink> kv_events = {}, const DraftModelSource* draft = nullptr);

  // shutdown(kAbort), then removes the crash handler.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe; never blocks on the worker. An empty callback selects pull delivery
  // (RequestHandle::next); otherwise every event goes to the callback (request_stream.h).
  RequestHandle submit(Request request, EventCallback on_event = {});

  // The worker's snapshot as of its last step boundary, plus the requests it has not taken yet
  // (counted as waiting; one being taken while this runs may be missing from the counts).
  EngineMetrics metrics() const;
  // What the engine holds at its latest step boundary (engine_snapshot.h): requests with their
  // progress, recent steps, the KV page map. Calling it keeps the worker taking snapshots for a
  // few seconds (a snapshot costs the worker a walk over sequences and pages, so it takes none
  // while nobody looks); the first call may return an older one.
  EngineSnapshot snapshot() const { return snapshots_.read(); }
  // Evicts every cached KV page that no request holds, at the worker's next step boundary (so
  // it returns before that; metrics show kv_pages_cached 0 once done). Session histories stay:
  // their next turns prefill again. For operators and tests (vLLM's /reset_prefix_cache).
  void reset_prefix_cache() { gateway_->request_prefix_cache_flush(); }

  // Ends conversation session `id`: its history is dropped (its cached KV pages stay cached
  // until the pool needs them). A turn still running goes on to its end but is not recorded.
  // Error if there is no such session (over HTTP: DELETE /v1/sessions/{id} → 404).
  Status end_session(const std::string& id);
  // end_session, and cancels the session's running turn, if any (DELETE ...?kill=true).
  Status kill_session(const std::string& id);
  // The session's history (prompt and generated tokens of its completed turns); nullopt if
  // there is no such session.
  std::optional<std::vector<TokenId>> session_history(const std::string& id) const {
    return sessions_.history(id, EngineClock::now());
  }

  // False once the executor failed for good (or the worker hit a bug): every request then ended
  // with an error, and every later one is rejected.
  bool healthy() const;

  // Stops taking requests (later submits are rejected), then kDrain runs every request already
  // accepted to its end, kAbort ends them "cancelled"; joins the worker; with a disk tier, writes
  // the cached pages RAM still holds and the sessions' histories to it (so that they survive the
  // restart). Safe to call more
  // than once and from several threads; a later kAbort cuts a drain short.
  void shutdown(ShutdownMode mode);

  // The token ids submit would run for `prompt` outside any session (what /tokenize shows): BOS
  // as the model asks, a conversation through the chat template. Error if a conversation cannot
  // be rendered.
  Expected<std::vector<TokenId>> tokenize(Prompt prompt) const;
  // The tokens submit would run for `prompt` as a turn of `session_id` (none: outside any
  // session) as the session stands now, for Request::tokenized. Thread-safe.
  Expected<TokenizedTurn> tokenize_turn(Prompt prompt,
                                        const std::optional<std::string>& session_id) const;
  // The text of `tokens`; `render_special` gives control tokens their text ("<|im_end|>"). Error
  // for an id outside the vocabulary.
  Expected<std::string> detokenize(std::span<const TokenId> tokens,
                                   bool render_special = false) const;
  // One token's own text (control tokens included), as logprobs show it: may be part of a
  // character.
  Expected<std::string> token_text(TokenId token) const;

  const EngineSetup& setup() const { return setup_; }
  int32_t vocab_size() const { return vocab_size_; }  // token ids of a prompt are below it
  const TextCodec& codec() const { return *codec_; }
  const ProgressLog& progress_log() const { return log_; }

 private:
  Engine(const EngineSetup& setup, int32_t vocab_size, std::shared_ptr<const TextCodec> codec,
         std::shared_ptr<const void> executor_resources, std::unique_ptr<Executor> executor,
         KVCacheManager kv);
  // Tokenizes the request and has the judge admit it into `accepted` on the submitting thread
  // (and begins its session turn), or says why it cannot run; `prompt_tokens` is set as soon as
  // the prompt is known (for the usage of a rejection).
  std::optional<Rejection> accept(Request& request, RequestId id,
                                  const std::shared_ptr<RequestStream>& stream,
                                  std::optional<AcceptedRequest>& accepted, int32_t& prompt_tokens);
  // The prompt's token ids; a turn that continues a session gets no BOS/EOS.
  Expected<std::vector<TokenId>> encode(Prompt prompt, bool continues_session) const;
  // Opens the disk tier of setup_.kv_disk_dir under the prefix cache, and restores the sessions
  // saved there.
  Status open_disk_tier(const ModelFacts& model);
  // Tells the KV event sink of the tier's pages: those found at start, then every change.
  void announce_disk_pages();
  // Page rows the disk tier's staging holds (open_disk_tier).
  int32_t staging_rows(uint64_t page_bytes) const;
  // Where the sessions' histories are kept across restarts (with a disk tier).
  std::string sessions_path() const { return disk_store_->folder() + "/sessions"; }

  const EngineSetup setup_;
  const int32_t vocab_size_;
  const std::shared_ptr<const TextCodec> codec_;
  const AdmissionJudge judge_;                            // over setup_: the one judge of requests
  const std::shared_ptr<const void> executor_resources_;  // outlives the executor that reads it
  const std::unique_ptr<Executor> executor_;
  ProgressLog log_;
  KVCacheManager kv_;
  std::shared_ptr<KVEventSink> kv_events_;     // outlives the prefix cache that calls it
  std::unique_ptr<PrefixCache> prefix_cache_;  // over kv_; null when prefix caching is off
  // The disk tier under the prefix cache (null: none); it reads and writes executor_'s pages.
  std::unique_ptr<KVDiskStore> disk_store_;
  std::unique_ptr<PrefixDiskTier> disk_tier_;
  std::once_flag disk_written_back_;
  std::unique_ptr<DraftModel> draft_model_;  // null: none; outlives the scheduler that asks it
  std::unique_ptr<EngineScheduler> scheduler_;
  const std::shared_ptr<Gateway> gateway_;  // shared with handles, which may outlive the engine
  mutable SessionStore sessions_;
  MetricsBoard board_;
  SnapshotBoard snapshots_;
  std::unique_ptr<EngineWorker> worker_;
  std::thread thread_;
  std::mutex join_mutex_;
  bool crash_handler_installed_ = false;
  std::atomic<RequestId> next_id_{kFirstEngineAssignedId};
};

}  // namespace drift
