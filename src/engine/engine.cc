#include "engine/engine.h"

#include <algorithm>
#include <limits>

#include "engine/engine_worker.h"
#include "engine/session_file.h"
#include "util/log.h"

namespace drift {

Expected<std::unique_ptr<Engine>> Engine::create(
    const EngineConfig& config, const ModelFacts& model, std::shared_ptr<const TextCodec> codec,
    ExecutorFactory make_executor, std::shared_ptr<const void> executor_resources,
    std::shared_ptr<KVEventSink> kv_events, const DraftModelSource* draft) {
  if (!codec) return make_error("codec: the engine needs a tokenizer (text codec), got none");
  std::optional<uint64_t> ram = physical_ram_bytes();
  if (!ram && config.kv.budget.ram_fraction)
    return make_error("kv.budget: the system does not report its RAM; give the budget in bytes");
  DRIFT_ASSIGN_OR_RETURN(EngineSetup setup, resolve_engine_setup(config, model, ram.value_or(0)));
  DRIFT_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, make_executor(setup));
  if (!executor) return make_error("executor: the factory returned none");
  DRIFT_ASSIGN_OR_RETURN(KVCacheManager kv,
                         KVCacheManager::create(setup.kv_layout, setup.num_kv_pages));

  std::unique_ptr<Engine> engine(new Engine(setup, model.vocab_size, std::move(codec),
                                            std::move(executor_resources), std::move(executor),
                                            std::move(kv)));
  engine->kv_events_ = std::move(kv_events);
  if (setup.enable_prefix_caching)
    engine->prefix_cache_ =
        std::make_unique<PrefixCache>(engine->kv_, default_prefix_hash, engine->kv_events_.get());
  if (setup.kv_disk_dir) DRIFT_RETURN_IF_ERROR(engine->open_disk_tier(model));
  if (draft && setup.scheduler.spec.enabled()) {
    DRIFT_ASSIGN_OR_RETURN(engine->draft_model_,
                           DraftModel::create(*draft, config, setup, model.vocab_size));
  }
  DRIFT_ASSIGN_OR_RETURN(
      engine->scheduler_,
      EngineScheduler::create(setup.scheduler, model.eog_token_ids, engine->kv_, engine->log_,
                              engine->prefix_cache_.get(), engine->disk_tier_.get(),
                              engine->draft_model_.get()));
  engine->worker_ = std::make_unique<EngineWorker>(
      *engine->scheduler_, engine->kv_, *engine->executor_, *engine->gateway_, engine->log_,
      engine->board_, engine->snapshots_, engine->sessions_, setup.latency,
      engine->draft_model_.get());
  // The last engine created in a process is the one whose events a crash prints.
  install_progress_crash_handler(engine->log_);
  engine->crash_handler_installed_ = true;
  engine->thread_ = std::thread([worker = engine->worker_.get()] { worker->run(); });
  return engine;
}

Engine::Engine(const EngineSetup& setup, int32_t vocab_size, std::shared_ptr<const TextCodec> codec,
               std::shared_ptr<const void> executor_resources, std::unique_ptr<Executor> executor,
               KVCacheManager kv)
    : setup_(setup),
      vocab_size_(vocab_size),
      codec_(std::move(codec)),
      judge_(setup_, vocab_size, codec_->harmony_tokens().has_value()),
      executor_resources_(std::move(executor_resources)),
      executor_(std::move(executor)),
      kv_(std::move(kv)),
      gateway_(
          std::make_shared<Gateway>(setup.max_queued_requests, setup.latency.max_ttft_seconds)),
      sessions_(setup.sessions) {}

Status Engine::open_disk_tier(const ModelFacts& model) {
  // Rule: pages are kept apart by everything their bytes depend on besides the tokens: the
  // model (weights, RoPE), the KV dtype, the page shape and grouping, the executor's page bytes.
  KVPageMemory* memory = executor_->page_memory();
  if (!memory) return make_error("kv.disk_dir: this executor gives no access to its KV pages");
  const KVLayout& layout = setup_.kv_layout;
  std::vector<uint64_t> shape = {model.kv_identity.lo,        model.kv_identity.hi,
                                 uint64_t(layout.dtype),      uint64_t(layout.page_size),
                                 uint64_t(layout.num_layers), uint64_t(layout.num_kv_heads),
                                 uint64_t(layout.head_dim),   memory->page_bytes()};
  for (int32_t g = 0; g < layout.num_groups(); ++g)
    shape.push_back(uint64_t(uint32_t(layout.group(g).sliding_window)));
  for (size_t i = 0; i < setup_.kv_grouping.layer_group.size(); ++i)
    shape.push_back(uint64_t(setup_.kv_grouping.layer_group[i]) << 32 |
                    uint32_t(setup_.kv_grouping.layer_slot[i]));
  KVDiskStoreConfig config;
  config.dir = *setup_.kv_disk_dir;
  config.budget_bytes = setup_.kv_disk_budget_bytes;
  config.fingerprint = kv_digest_bytes(
      {reinterpret_cast<const uint8_t*>(shape.data()), shape.size() * sizeof(uint64_t)});
  config.page_size = layout.page_size;
  config.page_bytes = memory->page_bytes();
  config.staging_pages = staging_rows(memory->page_bytes()) * layout.num_groups();
  config.keep_pages_found = kv_events_ != nullptr;
  DRIFT_ASSIGN_OR_RETURN(disk_store_, KVDiskStore::open(config));
  DRIFT_ASSIGN_OR_RETURN(disk_tier_,
                         PrefixDiskTier::create(kv_, *prefix_cache_, *disk_store_, *memory));
  // A finished read may let a waiting request in: an idle worker must take another step.
  disk_store_->set_on_read_done([gateway = gateway_] { gateway->wake(); });
  // Sessions of the last life continue, their prefixes warm through the tier.
  Expected<SessionHistories> histories = load_session_histories(sessions_path());
  if (histories.ok()) {
    sessions_.restore(*histories, EngineClock::now());
  } else {
    spdlog::warn("{}", histories.error().message);
  }
  if (kv_events_) announce_disk_pages();
  return Status::Ok();
}

int32_t Engine::staging_rows(uint64_t page_bytes) const {
  // Rule: a row for every row one step can take from the pool, so that write-ahead can stage
  // every page a step may reclaim before it does; at least the store's default, at most an
  // eighth of the pool's bytes. Beyond the staging, an eviction waits for a slot (never drops).
  const SchedulerConfig& s = setup_.scheduler;
  const KVLayout& layout = setup_.kv_layout;
  const int64_t step_rows =
      EngineScheduler::rows_one_step_takes(s, layout.page_size, s.max_num_seqs);
  const uint64_t row_bytes = page_bytes * uint64_t(layout.num_groups());
  const auto cap = int64_t(uint64_t(kv_.num_pages()) * page_bytes / 8 / row_bytes);
  const int64_t floor = KVDiskStoreConfig{}.staging_pages;
  return int32_t(std::max(floor, std::min(step_rows, cap)));
}

void Engine::announce_disk_pages() {
  // Rule: routers hear of the pages on disk (medium "DISK"): those a restart found first, then
  // every page written or deleted — group 0's full pages only, a router matching text one page
  // at a time (a swapped sequence's partial page and the sliding groups' pages are no blocks).
  std::vector<KVFoundBlock> found;
  for (KVDiskFoundPage& page : disk_store_->take_pages_found_at_start())
    found.push_back(KVFoundBlock{page.key.hash, page.key.parent_hash, std::move(page.tokens)});
  kv_events_->disk_blocks_found(std::move(found));
  disk_store_->set_on_change([sink = kv_events_.get()](const KVDiskChange& change) {
    if (change.key.partial || change.key.group != 0) return;
    if (change.stored) {
      sink->disk_block_stored(change.key.hash, change.key.parent_hash, change.tokens);
    } else {
      sink->disk_block_removed(change.key.hash);
    }
  });
}

Engine::~Engine() {
  shutdown(ShutdownMode::kAbort);
  if (crash_handler_installed_) uninstall_progress_crash_handler();
}

void Engine::shutdown(ShutdownMode mode) {
  gateway_->request_shutdown(mode);
  std::lock_guard<std::mutex> lock(join_mutex_);
  if (thread_.joinable()) thread_.join();
  gateway_->mark_stopped();
  // The worker is gone: its KV manager and pages are this thread's now.
  if (disk_tier_) {
    std::call_once(disk_written_back_, [&] {
      disk_tier_->write_back_cached();
      if (Status s =
              save_session_histories(sessions_path(), sessions_.histories(EngineClock::now()));
          !s.ok())
        spdlog::warn("{}", s.message());
    });
  }
}

bool Engine::healthy() const { return worker_ && worker_->healthy(); }

EngineMetrics Engine::metrics() const {
  // The snapshot first, then the intake: the worker takes before it publishes, so a request is
  // never counted both as queued here and in the snapshot (one taken in between is briefly in
  // neither).
  EngineMetrics m = board_.read();
  m.num_waiting += gateway_->num_queued();
  m.sessions = sessions_.stats(EngineClock::now());
  m.threads = setup_.threads;
  if (kv_events_) m.kv_events = kv_events_->counts();
  return m;
}

Status Engine::end_session(const std::string& id) {
  Expected<std::shared_ptr<RequestStream>> ended = sessions_.end(id);
  return ended.ok() ? Status::Ok() : Status(ended.error());
}

Status Engine::kill_session(const std::string& id) {
  // Rule: the session goes at once; its running turn ends "cancelled" at the next step boundary.
  Expected<std::shared_ptr<RequestStream>> ended = sessions_.end(id);
  if (!ended.ok()) return ended.error();
  if (const std::shared_ptr<RequestStream>& running = *ended;
      running && !running->finished() && running->request_cancel())
    gateway_->cancel(running);
  return Status::Ok();
}

RequestHandle Engine::submit(Request request, EventCallback on_event) {
  const EngineClock::time_point submitted = EngineClock::now();
  const RequestId id = request.id.value_or(next_id_.fetch_add(1, std::memory_order_relaxed));
  auto stream = std::make_shared<RequestStream>(id, std::move(on_event));

  int32_t prompt_tokens = 0;
  std::optional<AcceptedRequest> accepted;
  std::optional<Rejection> refused = accept(request, id, stream, accepted, prompt_tokens);
  // Made before the push: once queued, the request's events may flow at once.
  RequestHandle handle(stream, gateway_, prompt_tokens);
  int64_t max_new = 0;
  if (!refused) {
    accepted->submitted = submitted;
    max_new = accepted->sequence.request().max_new_tokens;
    std::optional<std::string> session = accepted->session_id;
    refused = gateway_->push(*accepted);
    if (refused && session) sessions_.end_turn(*session, id, {}, false, EngineClock::now());
  }
  if (refused) {
    log_.record(ProgressEvent::kReject, id, judge_.kv_pages_to_hold(prompt_tokens, max_new),
                setup_.num_kv_pages);
    board_.count_rejected_at_submit();
    Finish finish;
    finish.reason = FinishReason::kRejected;
    finish.reject_reason = refused->reason;
    finish.message = std::move(refused->message);
    finish.retry_after_seconds = refused->retry_after_seconds;
    finish.usage.prompt_tokens = prompt_tokens;
    finish.timings.end_to_end_seconds =
        std::chrono::duration<double>(EngineClock::now() - submitted).count();
    TokenEvent event;
    event.finish = std::move(finish);
    stream->deliver(std::move(event));
  }
  return handle;
}

std::optional<Rejection> Engine::accept(Request& request, RequestId id,
                                        const std::shared_ptr<RequestStream>& stream,
                                        std::optional<AcceptedRequest>& accepted,
                                        int32_t& prompt_tokens) {
  // Rule: the judge decides whether the request can run (admission_judge.h); between its steps
  // the engine compiles the grammar, tokenizes the prompt and begins the session's turn.
  std::optional<AdmissionJudge::Fields> fields;
  if (std::optional<Rejection> refused = judge_.judge_fields(request, id, fields)) return refused;
  std::shared_ptr<TokenConstraint> constraint;
  if (request.compiled_grammar) {
    constraint = request.compiled_grammar->clone();
  } else if (request.grammar) {
    Expected<std::unique_ptr<TokenConstraint>> matcher = codec_->compile_grammar(*request.grammar);
    if (!matcher.ok())
      return make_rejection(RejectReason::kInvalidGrammar, "{}", matcher.error().message);
    constraint = std::move(*matcher);
  }
  const EngineClock::time_point now = EngineClock::now();
  // A turn that continues a conversation gets no second BOS in the middle of it.
  const bool continues_session =
      request.session_id && sessions_.has_history(*request.session_id, now);
  Expected<std::vector<TokenId>> prompt =
      request.tokenized && request.tokenized->continues_session == continues_session
          ? Expected<std::vector<TokenId>>(std::move(request.tokenized->tokens))
          : encode(std::move(request.prompt), continues_session);
  if (!prompt.ok())
    return make_rejection(reject_reason_for_prompt(prompt.error()), "{}", prompt.error().message);
  prompt_tokens = int32_t(std::min<size_t>(prompt->size(), INT32_MAX));
  std::optional<AdmissionJudge::Size> size;
  if (request.session_id) {
    // The session's history goes before the input; the whole prompt is judged under its lock.
    std::optional<Rejection> sizing;
    auto size_turn = [&](std::span<const TokenId> whole) -> Expected<int32_t> {
      prompt_tokens = int32_t(std::min<size_t>(whole.size(), INT32_MAX));
      sizing = judge_.judge_size(*fields, whole, size);
      if (sizing) return Error{sizing->message};
      return size->max_new_tokens();
    };
    SessionStore::Refusal why = SessionStore::Refusal::kInvalidId;
    Expected<std::vector<TokenId>> turn =
        sessions_.begin_turn(*request.session_id, id, stream, *prompt, size_turn, now, &why);
    if (!turn.ok()) {
      if (sizing) return sizing;
      const RejectReason reason = why == SessionStore::Refusal::kBusy ? RejectReason::kSessionBusy
                                  : why == SessionStore::Refusal::kCap
                                      ? RejectReason::kSessionLimit
                                      : RejectReason::kInvalidRequest;
      return Rejection{reason, turn.error().message, std::nullopt};
    }
    prompt = std::move(turn);
  } else if (std::optional<Rejection> sizing = judge_.judge_size(*fields, *prompt, size)) {
    return sizing;
  }
  OutputProcessor::ReplyReading reading;
  if (request.reply_format == ReplyFormat::kHarmony) reading.harmony = codec_->harmony_tokens();
  reading.tool_call_syntax = request.tool_call_syntax;
  reading.parallel_tool_calls = request.parallel_tool_calls;
  accepted.emplace(AcceptedRequest{
      judge_.admit(std::move(*fields), *size, std::move(*prompt), std::move(constraint)), stream,
      std::make_unique<OutputProcessor>(codec_->start_stream(), std::move(request.stop),
                                        std::move(reading)),
      EngineClock::time_point{}, request.session_id});
  return std::nullopt;
}

Expected<std::vector<TokenId>> Engine::encode(Prompt prompt, bool continues_session) const {
  if (auto* tokens = std::get_if<std::vector<TokenId>>(&prompt)) return std::move(*tokens);
  if (auto* chat = std::get_if<ChatPrompt>(&prompt)) return codec_->encode_chat(*chat);
  TextPrompt& text = std::get<TextPrompt>(prompt);
  if (continues_session) text.add_special = false;
  return codec_->encode(text);
}

Expected<std::vector<TokenId>> Engine::tokenize(Prompt prompt) const {
  return encode(std::move(prompt), /*continues_session=*/false);
}

Expected<TokenizedTurn> Engine::tokenize_turn(Prompt prompt,
                                              const std::optional<std::string>& session_id) const {
  const bool continues_session =
      session_id && sessions_.has_history(*session_id, EngineClock::now());
  Expected<std::vector<TokenId>> tokens = encode(std::move(prompt), continues_session);
  if (!tokens.ok()) return tokens.error();
  return TokenizedTurn{std::move(*tokens), continues_session};
}

Expected<std::string> Engine::detokenize(std::span<const TokenId> tokens,
                                         bool render_special) const {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab_size_)
      return make_error("token {} at position {} is outside the vocabulary of {}", tokens[i], i,
                        vocab_size_);
  return codec_->decode(tokens, render_special);
}

Expected<std::string> Engine::token_text(TokenId token) const {
  if (token < 0 || token >= vocab_size_)
    return make_error("token {} is outside the vocabulary of {}", token, vocab_size_);
  return codec_->token_text(token);
}

}  // namespace drift
