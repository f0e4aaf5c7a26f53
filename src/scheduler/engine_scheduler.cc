#include "scheduler/engine_scheduler.h"

#include <algorithm>
#include <cassert>

namespace drift {

Expected<std::unique_ptr<EngineScheduler>> EngineScheduler::create(
    const SchedulerConfig& config, std::vector<TokenId> eos_token_ids, KVCacheManager& kv,
    ProgressLog& log, PrefixCache* prefix_cache, PrefixDiskTier* tier, DraftProposer* draft_model) {
  DRIFT_RETURN_IF_ERROR(config.validate());
  if (config.spec.enabled() && config.spec.mode == SpecMode::kDraft && !draft_model)
    return make_error("spec.mode draft needs a draft model (--spec-draft-model), got none");
  for (TokenId id : eos_token_ids)
    if (id < 0) return make_error("eos_token_ids must be >= 0, got {}", id);
  return std::unique_ptr<EngineScheduler>(
      new EngineScheduler(config, std::move(eos_token_ids), kv, log, prefix_cache, tier,
                          config.spec.enabled() ? draft_model : nullptr));
}

EngineScheduler::EngineScheduler(const SchedulerConfig& config, std::vector<TokenId> eos_token_ids,
                                 KVCacheManager& kv, ProgressLog& log, PrefixCache* prefix_cache,
                                 PrefixDiskTier* tier, DraftProposer* draft_model)
    : config_(config),
      eos_token_ids_(std::move(eos_token_ids)),
      kv_(kv),
      log_(log),
      prefix_(prefix_cache),
      tier_(prefix_cache ? tier : nullptr),
      capacity_(config.admission, kv, config.kv_compress, config.max_step_tokens()),
      waiting_order_(make_waiting_order(config)),
      draft_model_(draft_model),
      prefill_token_budget_(config.max_num_batched_tokens) {
  // Size everything a step touches once, so that steps do not allocate.
  size_t seqs = size_t(config.max_num_seqs);
  size_t tokens = size_t(config.max_num_batched_tokens);
  // Without forks or shared prefixes the page lists of a step hold at most every page once, in
  // every group (a sliding group's freed pages keep their place in its list).
  const int64_t groups = kv.layout().num_groups();
  int64_t pages =
      groups * std::min<int64_t>(int64_t(seqs) * kv.layout().pages_for_tokens(config.max_model_len),
                                 kv.num_pages() + seqs);
  running_.reserve(seqs);
  outcomes_.reserve(seqs + size_t(config.spec.max_plan_draft_tokens()));  // a token per draft
  plan_.items.reserve(seqs);
  plan_.page_copies.reserve(seqs * size_t(groups));
  plan_.kv_compressions.reserve(seqs);
  plan_.token_ids.reserve(tokens);
  plan_.block_table.reserve(size_t(pages));
  plan_.page_size = kv.page_size();
  plan_.kv_groups = kv.layout().num_groups();
  prefix_pages_.reserve(size_t(groups * kv.layout().pages_for_tokens(config.max_model_len)));
  page_row_.resize(size_t(groups));
  draft_scratch_.resize(size_t(config.spec.max_draft_tokens));
  if (draft_model_) {
    draft_asks_.reserve(seqs);
    draft_asked_.reserve(seqs);
  }
  if (config.spec.enabled()) pool_ = NgramPool(config.spec.pool_entries, config.spec.pool_context);
}

// ---- Requests ----

void EngineScheduler::add(AdmittedRequest admitted) {
  // Rule: the engine's judge has decided that the request can run (admitted_request.h); it joins
  // the waiting queue in policy order.
  SequenceRequest& request = admitted.request_;
  assert(!seqs_.contains(request.id) && "the worker adds no id in use");
  const int64_t prompt_len = int64_t(request.prompt.size());
  const bool embeds = request.pooling != PoolingMode::kNone;
  SequenceState& seq = seqs_[request.id];
  seq.id = request.id;
  seq.prompt_len = int32_t(prompt_len);
  seq.tokens = std::move(request.prompt);
  seq.tokens.reserve(size_t(prompt_len + request.max_new_tokens));
  seq.max_new_tokens = request.max_new_tokens;
  seq.priority = request.priority;
  seq.sampling = std::move(request.sampling);
  seq.constraint = std::move(request.constraint);
  seq.cache_namespace = request.cache_namespace;
  seq.pooling = request.pooling;
  seq.embedding = std::move(request.embedding);
  seq.kv_keep = request.kv_keep;
  assert(check_admitted(seq).ok());
  // Not in a compressed sequence: a rollback would not restore its slots (design notes). A
  // sequence with a grammar speculates too: its drafts are first the tokens the grammar forces.
  seq.speculates = config_.spec.enabled() && !embeds && !seq.kv_compressed();
  seq.draft_length = AdaptiveDraftLength(config_.spec.max_draft_tokens);
  if (seq.speculates && draft_model_) seq.model_draft.resize(size_t(config_.spec.max_draft_tokens));
  seq.arrival_step = step_;
  seq.arrival_order = next_arrival_order_++;
  seq.waiting_rank = waiting_order_->rank(seq);
  enqueue_waiting(seq);
  if (!embeds) pool_.record(seq.tokens, 0, seq.cache_namespace);  // drafts for later requests
  log_.record(ProgressEvent::kEnqueue, seq.id, seq.prompt_len, seq.max_new_tokens);
}

std::optional<SequenceOutcome> EngineScheduler::end_early(SeqId id, FinishReason reason) {
  // Rule: a cancel (or a stop the engine found) ends the sequence in any phase and frees
  // everything it holds.
  auto it = seqs_.find(id);
  if (it == seqs_.end() || it->second.cancel_pending) return std::nullopt;
  SequenceState& seq = it->second;
  if (reason == FinishReason::kCancelled)
    log_.record(ProgressEvent::kCancel, id, int64_t(seq.phase));
  if (plan_outstanding_ && seq.last_scheduled_step == plan_.step) {
    seq.cancel_pending = true;  // the executor may still read its pages and tokens
    return SequenceOutcome{id, std::nullopt, reason, {}};
  }
  outcomes_.clear();
  finish(seq, reason, {});
  return outcomes_.back();
}

void EngineScheduler::waiting_not_started(std::vector<SeqId>& out) const {
  for (const SequenceState* s : waiting_)
    if (s->generated_len() == 0) out.push_back(s->id);
}

void EngineScheduler::set_prefill_token_budget(int32_t tokens) {
  prefill_token_budget_ = std::clamp(tokens, 1, config_.max_num_batched_tokens);
}

StepLoad EngineScheduler::load() const {
  StepLoad load;
  for (const SequenceState* s : running_) {
    if (s->phase == SequencePhase::kDecode) {
      ++load.decoding;
      load.decode_context += s->total_len();
    } else {
      load.prefill_start = std::max(load.prefill_start, s->num_computed_tokens);
      load.pending_prefill_tokens += s->num_pending_tokens();
    }
  }
  for (const SequenceState* s : waiting_) load.pending_prefill_tokens += s->num_pending_tokens();
  load.waiting = int32_t(waiting_.size());
  return load;
}

// ---- Step composition ----

const StepPlan& EngineScheduler::schedule_step() {
  // Rule: decode tokens of running sequences first, then prefill chunks (or prefill first when
  // prefer_decode_over_prefill is off), never beyond the step's token and sequence budgets.
  if (plan_outstanding_) return plan_;
  begin_step();
  if (config_.prefer_decode_over_prefill) {
    schedule_decodes();
    schedule_running_prefills();
    schedule_admissions();
  } else {
    schedule_running_prefills();
    schedule_admissions();
    schedule_decodes();
  }
  end_step();
  return plan_;
}

void EngineScheduler::begin_step() {
  // Rule: a step starts with the whole budgets; every running prefill is still unfinished; a
  // short prompt at the head of the queue (at most half the prefill budget) gets room beside
  // running prefills, so it is not kept waiting behind a long one.
  // Tables of sequences that ended since the last plan the executor ran (an empty plan runs
  // nothing, so its list carries over), dropped before this step's items run.
  if (plan_.empty())
    kv_tables_to_release_.insert(kv_tables_to_release_.begin(), plan_.kv_tables_released.begin(),
                                 plan_.kv_tables_released.end());
  plan_.clear();
  plan_.step = step_;
  if (tier_) {
    tier_->complete_loads();  // pages read from disk join the prefix cache
    // A step may reclaim more cached pages than the store has staging slots: the ones it could
    // reclaim are written ahead, while steps run.
    tier_->write_ahead(max_pages_one_step_takes() - kv_.num_free_pages());
  }
  plan_.kv_tables_released.swap(kv_tables_to_release_);
  token_budget_ = config_.max_num_batched_tokens;
  prefill_budget_ = prefill_token_budget_;
  draft_budget_ = plan_draft_budget();
  if (draft_budget_ > 0 && draft_model_) ask_draft_model();
  held_for_waiting_head_ = 0;
  if (config_.enable_chunked_prefill && !waiting_.empty() &&
      waiting_.front()->num_pending_tokens() <= prefill_budget_ / 2)
    held_for_waiting_head_ = waiting_.front()->num_pending_tokens();
  partial_prefills_ = 0;
  decode_pages_held_back_ = 0;
  none_decoding_ = true;
  for (const SequenceState* s : running_) {
    partial_prefills_ += s->phase == SequencePhase::kPrefill;
    none_decoding_ &= s->phase != SequencePhase::kDecode;
    if (s->phase == SequencePhase::kDecode && !config_.prefer_decode_over_prefill)
      decode_pages_held_back_ += kv_.pool_pages_to_append(s->id, 1);
  }
}

void EngineScheduler::schedule_decodes() {
  // Rule: every decoding sequence gets its one token, in protection order; a page it lacks is
  // taken from lower-ranked sequences not in this step, else it waits a step. Drafts come after:
  // each takes only what the decodes still to place leave of the budgets.
  int32_t unplaced = 0;  // decodes not yet placed in this step
  if (draft_budget_ > 0)
    for (const SequenceState* s : running_)
      unplaced += s->phase == SequencePhase::kDecode && s->last_scheduled_step != step_;
  for (size_t i = 0; i < running_.size() && token_budget_ > 0; ++i) {
    SequenceState& seq = *running_[i];
    if (seq.phase != SequencePhase::kDecode || seq.last_scheduled_step == step_) continue;
    if (!make_room(seq, 1)) continue;
    unplaced = std::max(0, unplaced - 1);
    const int32_t room = std::min(draft_budget_, token_budget_ - 1 - unplaced);
    const int32_t n = draft_for(seq, room, unplaced);
    add_item(seq, 1, std::span<const TokenId>(draft_scratch_.data(), size_t(n)));
  }
}

void EngineScheduler::schedule_running_prefills() {
  // Rule: unfinished prefills continue in protection order, each with a chunk bounded by the
  // budget, the long-prefill threshold and the pages it can get (preempting below it for at
  // least a page's worth).
  for (size_t i = 0; i < running_.size() && token_budget_ > 0; ++i) {
    SequenceState& seq = *running_[i];
    if (seq.phase != SequencePhase::kPrefill || seq.last_scheduled_step == step_) continue;
    int32_t want = prefill_chunk_limit(seq.num_pending_tokens());
    if (config_.enable_chunked_prefill)
      want = std::min(want, std::max(0, prefill_budget_ - held_for_waiting_head_));
    if (want == 0) continue;
    int32_t at_least = config_.enable_chunked_prefill ? std::min(want, kv_.page_size()) : want;
    make_room(seq, at_least);
    int32_t n = int32_t(std::min<int64_t>(want, kv_.appendable_tokens(seq.id)));
    if (n == 0 || (!config_.enable_chunked_prefill && n < want)) continue;
    if (n == seq.num_pending_tokens()) --partial_prefills_;  // completes in this step
    add_item(seq, n);
  }
}

void EngineScheduler::schedule_admissions() {
  // Rule: admit waiting requests in policy order while seats and budgets allow. One that waits
  // for a page in flight stops the loop (it will share the page); one blocked by KV pages or the
  // partial-prefill limit may be passed by later requests that fit, at most max_overtakes
  // times, after which it stops the loop too — so no request is overtaken forever.
  size_t i = 0;
  while (i < waiting_.size() && token_budget_ > 0 &&
         (prefill_budget_ > 0 || !config_.enable_chunked_prefill || none_decoding_) &&
         int32_t(running_.size()) < config_.max_num_seqs) {
    const Admission admission = try_admit(i);
    if (admission == Admission::kAdmitted) {
      bool passed_enough = false;  // a request passed over has reached its bound
      for (size_t j = 0; j < i; ++j)
        passed_enough |= ++waiting_[j]->times_overtaken >= config_.max_overtakes;
      if (passed_enough) break;
      continue;
    }
    if (admission == Admission::kStop || waiting_[i]->times_overtaken >= config_.max_overtakes)
      break;
    ++i;
  }
}

EngineScheduler::Admission EngineScheduler::try_admit(size_t waiting_index) {
  // Rule: a request's prefill starts after its cached prefix; one whose next pages a running
  // prefill is computing shares them instead of computing them a second time — joining the step
  // that writes them when that step writes them all, waiting for a later step otherwise.
  SequenceState& seq = *waiting_[waiting_index];
  CachedPrefix prefix = find_cached_prefix(seq);
  if (tier_ && waits_for_disk(seq, prefix)) {
    ++stats_.tier_waits;
    return Admission::kBlocked;
  }
  bool joins_writer = false;
  if (const PagesInFlight in_flight = pages_in_flight(seq, prefix.num_pages); in_flight.writer) {
    // The executor stores every token's K/V of a layer before any token attends (executor.h),
    // so the pages the writer's item fills hold its K/V when this sequence's tokens read them.
    if (!in_flight.written_this_step ||
        !share_pages_in_flight(prefix, *in_flight.writer, in_flight.num_pages)) {
      ++stats_.prefix_waits;
      return Admission::kStop;
    }
    joins_writer = true;
  }
  const int32_t restored = swapped_tail_tokens(seq, prefix);  // K/V copied, not computed
  const int32_t pending = seq.total_len() - prefix.num_pages * kv_.page_size() - restored;
  // With nothing decoding, a joiner's suffix goes in now even past the prefill budget (a bound on
  // how long arrivals wait, not on a stream's pauses): later it would be a step of its own,
  // cut by the inter-token target once the writer decodes.
  const int32_t want =
      prefill_chunk_limit(pending, /*past_prefill_budget=*/joins_writer && none_decoding_);
  if (want == 0) return Admission::kBlocked;
  const bool whole = want == pending;
  if (!whole && partial_prefills_ >= config_.max_num_partial_prefills) return Admission::kBlocked;
  if (capacity_.admissible_tokens(seq, prefix, decode_pages_held_back_) < restored + want) {
    capacity_.count_blocked();
    return Admission::kBlocked;
  }
  waiting_.erase(waiting_.begin() + std::ptrdiff_t(waiting_index));
  admit(seq, prefix);
  if (restored > 0) restore_swapped_tail(seq);
  if (!whole) ++partial_prefills_;
  if (joins_writer) ++stats_.prefix_shared_in_step;
  add_item(seq, want);
  return Admission::kAdmitted;
}

void EngineScheduler::end_step() {
  // Rule: a non-empty plan is outstanding until the executor's report.
  if (!plan_.empty()) {
    plan_outstanding_ = true;
    ++stats_.steps;
    stats_.prefill_tokens += uint64_t(plan_.num_prefill_tokens);
    stats_.decode_tokens += uint64_t(plan_.num_decode_tokens);
    log_.record(ProgressEvent::kStep, plan_.step, plan_.num_tokens(), int64_t(plan_.items.size()));
  }
  ++step_;
}

int32_t EngineScheduler::rows_one_step_takes(const SchedulerConfig& config, int32_t page_size,
                                             int32_t items) {
  // Its tokens (drafts included) fill at most tokens / page_size page rows, plus two for each
  // item (one it starts mid-way, one shared partial row it copies).
  return (config.max_num_batched_tokens + page_size - 1) / page_size + 2 * items;
}

int32_t EngineScheduler::max_pages_one_step_takes() const {
  // Items are the sequences running or waiting, at most max_num_seqs; a row is a page of every
  // KV group.
  const auto items =
      int32_t(std::min<size_t>(size_t(config_.max_num_seqs), running_.size() + waiting_.size()));
  return rows_one_step_takes(config_, kv_.page_size(), items) * kv_.layout().num_groups();
}

int32_t EngineScheduler::prefill_chunk_limit(int32_t pending, bool past_prefill_budget) const {
  // A chunk stays within long_prefill_token_threshold even past the prefill budget: it bounds
  // what one step adds to a sequence (SchedulerConfig::max_step_tokens), on which the pages a
  // sliding group or a compressed sequence holds, and so guaranteed admission's promise, rest.
  if (!config_.enable_chunked_prefill) return pending <= token_budget_ ? pending : 0;
  int32_t n = std::min(pending, token_budget_);
  if (!past_prefill_budget) n = std::min(n, prefill_budget_);
  if (config_.long_prefill_token_threshold) n = std::min(n, *config_.long_prefill_token_threshold);
  return n;
}

void EngineScheduler::admit(SequenceState& seq, const CachedPrefix& prefix) {
  const int32_t hit_tokens = prefix.num_pages * kv_.page_size();
  seq.kv_evicted = 0;
  seq.kv_keep_from = seq.kv_compressed() ? hit_tokens : 0;
  int32_t reserved = capacity_.admit(seq, prefix);
  seq.num_computed_tokens = hit_tokens;
  seq.swapped_tokens = 0;
  seq.prefix = prefix.cursor;
  if (prefix_) prefix_->record_query(seq.total_len(), hit_tokens);
  seq.phase = SequencePhase::kPrefill;
  if (draft_model_ && !seq.model_draft.empty()) draft_model_->start(seq.id);
  if (!seq.first_admitted_step) {
    seq.first_admitted_step = step_;
    seq.first_prefix_hit_tokens = hit_tokens;
  }
  auto at = std::upper_bound(
      running_.begin(), running_.end(), &seq,
      [](const SequenceState* a, const SequenceState* b) { return runs_before(*a, *b); });
  running_.insert(at, &seq);
  log_.record(ProgressEvent::kAdmit, seq.id, int64_t(step_ - seq.arrival_step), reserved);
}

void EngineScheduler::enqueue_waiting(SequenceState& seq) {
  seq.phase = SequencePhase::kWaiting;
  auto at = std::upper_bound(
      waiting_.begin(), waiting_.end(), &seq,
      [](const SequenceState* a, const SequenceState* b) { return waits_before(*a, *b); });
  waiting_.insert(at, &seq);
}

void EngineScheduler::add_item(SequenceState& seq, int32_t num_tokens,
                               std::span<const TokenId> drafts) {
  // Rule: the item's pages are bound now, so its slots and block table are final.
  const auto num_drafts = int32_t(drafts.size());
  std::optional<KVAppend> grown = kv_.append(seq.id, num_tokens + num_drafts, &plan_.page_copies);
  if (!grown) {  // callers check the room first
    assert(false && "add_item without room");
    return;
  }

  const int32_t start = seq.num_computed_tokens;
  const int32_t slots = seq.kv_slots();  // before this item
  StepItem item;
  item.seq_id = seq.id;
  item.kind = seq.phase == SequencePhase::kDecode ? StepItemKind::kDecode : StepItemKind::kPrefill;
  item.start_position = start;
  item.num_tokens = num_tokens + num_drafts;
  item.num_drafts = num_drafts;
  item.token_offset = plan_.num_tokens();
  item.page_offset = int32_t(plan_.block_table.size());
  item.num_pages = int32_t(kv_.pages(seq.id, 0).size());
  item.sample = start + num_tokens == seq.total_len() && !seq.embeds();
  item.pooling = seq.pooling;
  item.embedding = seq.embedding;
  item.sampling = &seq.sampling;
  item.constraint = seq.constraint.get();
  item.history = seq.tokens;
  item.prompt_len = seq.prompt_len;
  item.kv_compressed = seq.kv_compressed();
  item.kv_slots = slots;
  for (int32_t g = 0; g < plan_.kv_groups; ++g) {
    std::span<const PageId> pages = kv_.pages(seq.id, g);
    plan_.block_table.insert(plan_.block_table.end(), pages.begin(), pages.end());
  }
  plan_.token_ids.insert(plan_.token_ids.end(), seq.tokens.begin() + start,
                         seq.tokens.begin() + start + num_tokens);
  plan_.token_ids.insert(plan_.token_ids.end(), drafts.begin(), drafts.end());
  plan_.items.push_back(item);
  if (seq.kv_compressed()) plan_kv_compression(seq, int32_t(plan_.items.size()) - 1);
  token_budget_ -= num_tokens + num_drafts;
  draft_budget_ -= num_drafts;
  plan_.num_draft_tokens += num_drafts;
  seq.last_scheduled_step = step_;
  if (item.kind == StepItemKind::kDecode) {
    plan_.num_decode_tokens += num_tokens;
    log_.record(ProgressEvent::kDecode, seq.id, start, item.num_pages);
  } else {
    plan_.num_prefill_tokens += num_tokens;
    prefill_budget_ = std::max(0, prefill_budget_ - num_tokens);  // a joiner may go past it
    log_.record(ProgressEvent::kPrefillChunk, seq.id, start, num_tokens);
  }
}

void EngineScheduler::plan_kv_compression(const SequenceState& seq, int32_t item_index) {
  // Rule: once the step's slots exceed the sequence's target by a page, the executor compresses
  // it to the target after the step, never writing a page others read (below kv_keep_from).
  const StepItem& item = plan_.items[size_t(item_index)];
  KvCompressConfig config = config_.kv_compress;
  config.keep = seq.kv_keep;
  const int32_t positions = item.context_len();
  const int32_t slots = item.kv_slots + item.num_tokens;
  const auto target = int32_t(kv_keep_target(config, positions, seq.kv_keep_from));
  if (slots - target < kv_.page_size() || kv_.writes_shared_page(seq.id, seq.kv_keep_from)) return;
  plan_.kv_compressions.push_back(KvCompression{item_index, positions, seq.kv_keep_from, target});
}

Status EngineScheduler::apply_kv_compression(SequenceState& seq, const KvCompression& c) {
  // Rule: the executor has moved the kept entries down; the pages past them go back to the pool
  // (a guaranteed sequence keeps them promised, up to the estimate it was admitted with).
  const int32_t slots = int32_t(kv_.num_tokens(seq.id));
  Expected<KVRelease> released = kv_.compress(seq.id, c.keep_from, c.num_slots,
                                              capacity_.mode() == AdmissionMode::kGuaranteed);
  if (!released.ok()) return released.error();
  seq.kv_evicted += slots - c.num_slots;
  log_.record(ProgressEvent::kRelease, seq.id, released->references_dropped, c.num_slots);
  return Status::Ok();
}

void EngineScheduler::release_kv_table(const SequenceState& seq) {
  if (seq.kv_compressed() && kv_.contains(seq.id)) kv_tables_to_release_.push_back(seq.id);
}

// ---- Executor reports ----

std::span<const SequenceOutcome> EngineScheduler::on_step_executed(const ExecutionResult& result) {
  // Rule: each scheduled sequence advances by exactly what the executor reports; a sampled token
  // is appended, and a stop token or the token limit finishes the sequence.
  if (!plan_outstanding_) {
    outcomes_.clear();
    return outcomes_;
  }
  if (result.items.size() != plan_.items.size())
    return on_step_failed(make_error("executor returned {} results for a plan of {} items",
                                     result.items.size(), plan_.items.size()));
  outcomes_.clear();
  auto compression = plan_.kv_compressions.begin();  // in item order
  for (size_t i = 0; i < plan_.items.size(); ++i) {
    const StepItem& item = plan_.items[i];
    const KvCompression* compress = nullptr;
    if (compression != plan_.kv_compressions.end() && compression->item == int32_t(i))
      compress = &*compression++;
    auto it = seqs_.find(item.seq_id);
    if (it == seqs_.end() || it->second.last_scheduled_step != plan_.step) continue;
    SequenceState& seq = it->second;
    if (seq.cancel_pending) {  // already reported cancelled
      retire(seq, FinishReason::kCancelled);
      continue;
    }
    const ItemResult& r = result.items[i];
    if (r.error || (item.sample && (!r.token || *r.token < 0)) || r.accepted_drafts < 0 ||
        r.accepted_drafts > item.num_drafts || (item.completes_embedding() && !r.embedded)) {
      log_.record(ProgressEvent::kError, seq.id, int64_t(plan_.step), int64_t(i));
      finish(seq, FinishReason::kError,
             r.error ? r.error->message
                     : fmt::format("executor returned no valid {} for sequence {}",
                                   item.sample ? "token" : "embedding", seq.id));
      continue;
    }
    // Of a draft, only the accepted tokens' K/V stay (the sampled token's is computed next step).
    seq.num_computed_tokens += item.num_tokens - (item.num_drafts - r.accepted_drafts);
    if (item.num_drafts > 0) {
      count_verified(seq, item, r.accepted_drafts);
      if (Status s = roll_back_drafts(seq); !s.ok()) {
        finish(seq, FinishReason::kError, s.message());
        continue;
      }
    }
    if (compress) {
      if (Status s = apply_kv_compression(seq, *compress); !s.ok()) {
        finish(seq, FinishReason::kError, s.message());
        continue;
      }
    }
    cache_full_pages(seq);
    free_outside_windows(seq);
    if (item.completes_embedding()) {  // its vector is its only output
      outcomes_.push_back(SequenceOutcome{
          seq.id, std::nullopt, std::nullopt, {}, std::nullopt, std::move(seq.embedding)});
      finish(seq, FinishReason::kStop, {});
      continue;
    }
    if (!item.sample) continue;  // an earlier chunk of a prefill
    seq.phase = SequencePhase::kDecode;
    commit_tokens(seq, item, r);
  }
  plan_outstanding_ = false;
  executed_decoding_ = plan_.num_prefill_tokens == 0 ? step_decoding_ : 0;
  executed_committed_ = 0;
  for (const SequenceOutcome& o : outcomes_) executed_committed_ += o.token.has_value();
  return outcomes_;
}

std::span<const SequenceOutcome> EngineScheduler::on_step_failed(const Error& error) {
  // Rule: a failed step ends every sequence it carried; the others go on.
  outcomes_.clear();
  if (!plan_outstanding_) return outcomes_;
  for (const StepItem& item : plan_.items) {
    auto it = seqs_.find(item.seq_id);
    if (it == seqs_.end() || it->second.last_scheduled_step != plan_.step) continue;
    if (it->second.cancel_pending) {
      retire(it->second, FinishReason::kCancelled);
      continue;
    }
    log_.record(ProgressEvent::kError, item.seq_id, int64_t(plan_.step), -1);
    finish(it->second, FinishReason::kError, error.message);
  }
  plan_outstanding_ = false;
  return outcomes_;
}

std::span<const SequenceOutcome> EngineScheduler::abort_all(const Error& error) {
  // Rule: every sequence ends with the error, running ones first.
  outcomes_.clear();
  while (!running_.empty()) {
    SequenceState& seq = *running_.back();
    if (seq.cancel_pending) {
      retire(seq, FinishReason::kCancelled);
    } else {
      finish(seq, FinishReason::kError, error.message);
    }
  }
  while (!waiting_.empty()) finish(*waiting_.back(), FinishReason::kError, error.message);
  if (prefix_) prefix_->flush();
  plan_outstanding_ = false;
  return outcomes_;
}

void EngineScheduler::finish(SequenceState& seq, FinishReason reason, std::string message) {
  // Rule: a finished sequence is reported once (merged with this step's token, if any), then
  // retired.
  SeqId id = seq.id;
  retire(seq, reason);
  if (!outcomes_.empty() && outcomes_.back().id == id && !outcomes_.back().finish) {
    outcomes_.back().finish = reason;
    outcomes_.back().message = std::move(message);
  } else {
    outcomes_.push_back(SequenceOutcome{id, std::nullopt, reason, std::move(message)});
  }
}

void EngineScheduler::retire(SequenceState& seq, FinishReason reason) {
  // Rule: a finished sequence releases its pages exactly once, leaves every queue and is
  // forgotten.
  release_kv_table(seq);
  if (draft_model_) draft_model_->release(seq.id);
  if (tier_) tier_->drop_tail(seq.id);
  if (std::optional<KVRelease> released = capacity_.release(seq.id)) {
    log_.record(ProgressEvent::kRelease, seq.id, released->references_dropped,
                released->reservation_returned);
  }
  std::vector<SequenceState*>& queue = seq.phase == SequencePhase::kWaiting ? waiting_ : running_;
  queue.erase(std::find(queue.begin(), queue.end(), &seq));
  log_.record(ProgressEvent::kFinish, seq.id, int64_t(reason), seq.generated_len());
  ++stats_.finished;
  stats_.cancelled += reason == FinishReason::kCancelled;
  stats_.errors += reason == FinishReason::kError;
  seq.phase = SequencePhase::kFinished;
  seqs_.erase(seq.id);
}

Status EngineScheduler::advance_constraint(SequenceState& seq, TokenId token) {
  // Rule: a grammar sees every committed token but the stop token, which ends the output anyway.
  if (!seq.constraint) return Status::Ok();
  return seq.constraint->accept(token);
}

bool EngineScheduler::is_stop_token(const SequenceState& seq, TokenId token) const {
  const std::vector<int32_t>& stops = seq.sampling.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) return true;
  return !seq.sampling.ignore_eos &&
         std::find(eos_token_ids_.begin(), eos_token_ids_.end(), token) != eos_token_ids_.end();
}

// ---- Introspection ----

const SequenceState* EngineScheduler::find(SeqId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : &it->second;
}

Status EngineScheduler::check_admitted(const SequenceState& seq) const {
  // What an AdmittedRequest promises (admitted_request.h), of a sequence as add() built it.
  auto broken = [&](std::string what) {
    return make_error("scheduler: sequence {} was admitted with {}", seq.id, what);
  };
  if (seq.prompt_len < 1) return broken("an empty prompt");
  for (TokenId t : seq.prompt())
    if (t < 0) return broken(fmt::format("negative token id {}", t));
  if (seq.embeds() ? seq.max_new_tokens != 0 || seq.embedding.empty() : seq.max_new_tokens < 1)
    return broken(fmt::format(
        "max_new_tokens {} for {}", seq.max_new_tokens,
        seq.embeds() ? "an embedding (0, and room for its vector)" : "a generation (at least 1)"));
  if (int64_t(seq.prompt_len) + seq.max_new_tokens > config_.max_model_len)
    return broken(fmt::format("{} prompt + {} max new tokens, beyond max_model_len {}",
                              seq.prompt_len, seq.max_new_tokens, config_.max_model_len));
  if (Status s = seq.sampling.validate(); !s.ok()) return broken(s.message());
  if (!(seq.kv_keep > 0.0 && seq.kv_keep <= 1.0))
    return broken(fmt::format("kv_keep {}, outside (0, 1]", seq.kv_keep));
  const KVUsageEstimate worst = capacity_.estimate(seq.prompt_len, seq.max_new_tokens, seq.kv_keep);
  if (worst.num_pages > kv_.num_pages())
    return broken(fmt::format("a worst case of {} pages, more than the pool's {}", worst.num_pages,
                              kv_.num_pages()));
  return Status::Ok();
}

Status EngineScheduler::check_invariants() const {
  DRIFT_RETURN_IF_ERROR(kv_.check_invariants());
  if (prefix_) DRIFT_RETURN_IF_ERROR(prefix_->check_invariants());
  for (const auto& [id, seq] : seqs_) DRIFT_RETURN_IF_ERROR(check_admitted(seq));
  if (waiting_.size() + running_.size() != seqs_.size())
    return make_error("scheduler: {} waiting + {} running != {} sequences", waiting_.size(),
                      running_.size(), seqs_.size());
  if (int32_t(running_.size()) > config_.max_num_seqs)
    return make_error("scheduler: {} running > max_num_seqs {}", running_.size(),
                      config_.max_num_seqs);
  // Disk reads and swapped pages read back hold sequences of their own.
  const int32_t loads = tier_ ? tier_->num_sequences_held() : 0;
  if (kv_.num_sequences() != int32_t(running_.size()) + loads)
    return make_error("scheduler: kv holds {} sequences, {} are running, {} held by the disk tier",
                      kv_.num_sequences(), running_.size(), loads);
  for (size_t i = 0; i < waiting_.size(); ++i) {
    const SequenceState& s = *waiting_[i];
    if (s.phase != SequencePhase::kWaiting || kv_.contains(s.id) || s.num_computed_tokens != 0)
      return make_error("scheduler: waiting sequence {} is {} with kv", s.id,
                        sequence_phase_name(s.phase));
    if (i > 0 && waits_before(s, *waiting_[i - 1]))
      return make_error("scheduler: waiting queue out of order at {}", s.id);
  }
  int32_t prefilling = 0;
  for (size_t i = 0; i < running_.size(); ++i) {
    const SequenceState& s = *running_[i];
    if (s.phase != SequencePhase::kPrefill && s.phase != SequencePhase::kDecode)
      return make_error("scheduler: running sequence {} is {}", s.id, sequence_phase_name(s.phase));
    if (!kv_.contains(s.id)) return make_error("scheduler: running sequence {} has no kv", s.id);
    if (i > 0 && runs_before(s, *running_[i - 1]))
      return make_error("scheduler: running list out of order at {}", s.id);
    prefilling += s.phase == SequencePhase::kPrefill;
    if (plan_outstanding_) continue;
    if (kv_.num_tokens(s.id) != s.kv_slots())
      return make_error("scheduler: sequence {} has {} kv tokens but {} computed, {} evicted", s.id,
                        kv_.num_tokens(s.id), s.num_computed_tokens, s.kv_evicted);
    bool decode = s.phase == SequencePhase::kDecode;
    if (s.num_pending_tokens() < 1 ||
        (decode && (s.num_pending_tokens() != 1 || s.generated_len() == 0)))
      return make_error("scheduler: sequence {} is {} with {} pending tokens", s.id,
                        sequence_phase_name(s.phase), s.num_pending_tokens());
    if (capacity_.mode() == AdmissionMode::kGuaranteed &&
        kv_.promised_pages(s.id) < capacity_.estimate(s).num_pages)
      return make_error("scheduler: guaranteed sequence {} lost part of its reservation", s.id);
  }
  if (!plan_outstanding_ && prefilling > config_.max_num_partial_prefills)
    return make_error("scheduler: {} partial prefills > max_num_partial_prefills {}", prefilling,
                      config_.max_num_partial_prefills);
  return Status::Ok();
}

}  // namespace drift
