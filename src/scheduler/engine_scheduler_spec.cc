// Speculative decoding's part of the engine scheduler (docs/design-notes.md "Speculative
// decoding"): the step's draft budget, each decoding sequence's draft, and what the executor's
// verdict does to the sequence — its accepted tokens committed, the rejected drafts' KV slots
// returned — with the committing of generated tokens that plain decodes share.
#include <algorithm>

#include "scheduler/engine_scheduler.h"

namespace drift {

int32_t EngineScheduler::plan_draft_budget() {
  // Rule: drafts get what the step's decodes and the prefill it would run leave of the token
  // budget, and at most spec.max_step_draft_tokens less one per decoding sequence: with many
  // sequences decoding, the step is no longer bound by reading the weights, and extra tokens
  // would cost their full compute. Under --spec auto, only in steps whose batch size drafts have
  // been measured to pay for (or are being measured in).
  step_decoding_ = 0;
  if (!config_.spec.enabled()) return 0;
  int32_t decoding = 0;
  int64_t prefill = 0;  // prompt tokens that could run in this step
  for (const SequenceState* s : running_) {
    if (s->phase == SequencePhase::kDecode) {
      ++decoding;
    } else {
      prefill += s->num_pending_tokens();
    }
  }
  if (int32_t(running_.size()) < config_.max_num_seqs)
    for (const SequenceState* s : waiting_) prefill += s->num_pending_tokens();
  step_decoding_ = decoding;
  if (decoding == 0) return 0;
  if (config_.spec.mode == SpecMode::kAuto && !spec_gate_.drafts_allowed(decoding)) return 0;
  prefill = std::min<int64_t>(prefill, prefill_budget_);
  const int64_t spare = int64_t(config_.max_num_batched_tokens) - decoding - prefill;
  return int32_t(std::max<int64_t>(
      0, std::min<int64_t>(spare, config_.spec.max_step_draft_tokens - decoding)));
}

int32_t EngineScheduler::draft_for(SequenceState& seq, int32_t room, int32_t later_decodes) {
  // Rule: a draft takes only what no one else needs: room left in the step, no more tokens than
  // the sequence may still generate after the one this step samples anyway, slots within one
  // step's growth (what sliding groups' promises assume), and never a pool page that a decode
  // still to be placed may need (a page each) nor a cached one: drafting neither preempts nor
  // evicts the prefix cache.
  if (!seq.speculates) return 0;
  int64_t limit = std::min<int64_t>(
      {seq.draft_length.limit(), room, seq.max_new_tokens - seq.generated_len() - 1,
       config_.max_step_tokens() - 1, kv_.appendable_tokens(seq.id) - 1});
  const int64_t spare_pages =
      std::max<int64_t>(0, std::min<int64_t>(kv_.num_available_pages(),
                                             kv_.num_free_pages() - kv_.num_reserved_pages()) -
                               int64_t(later_decodes) * kv_.layout().num_groups());
  const int64_t decode_pages = kv_.pool_pages_to_append(seq.id, 1);
  while (limit > 0 &&
         kv_.pool_pages_to_append(seq.id, int32_t(1 + limit)) - decode_pages > spare_pages)
    --limit;
  const int32_t n =
      limit > 0 ? propose_draft(seq, std::span<TokenId>(draft_scratch_.data(), size_t(limit))) : 0;
  if (n == 0) seq.draft_length.on_step_without_draft();
  return n;
}

void EngineScheduler::ask_draft_model() {
  // Rule: the draft model drafts for every decoding sequence that may carry a draft this step,
  // except where its own history has a long n-gram match (spec.ngram_over_model_match tokens: a
  // verbatim repeat predicts better than a small model and costs nothing) or it has a grammar
  // (its forced tokens, then n-grams). One batch, so k draft tokens cost k passes
  // of the draft model whatever the batch. A draft the step then has no room for is cut or unused
  // (the draft model rolls it back).
  draft_asks_.clear();
  draft_asked_.clear();
  for (SequenceState* s : running_) {
    SequenceState& seq = *s;
    seq.model_draft_len = 0;
    if (seq.phase != SequencePhase::kDecode || !seq.speculates || seq.model_draft.empty()) continue;
    const int64_t limit = std::min<int64_t>({seq.draft_length.limit(), draft_budget_,
                                             seq.max_new_tokens - seq.generated_len() - 1,
                                             int64_t(seq.model_draft.size())});
    if (limit <= 0) continue;
    if (seq.constraint) continue;  // its grammar's forced tokens, then n-grams
    int32_t matched = 0;
    propose_ngram_draft(seq.tokens, ngram_, std::span<TokenId>(draft_scratch_.data(), 1), &matched);
    if (matched >= config_.spec.ngram_over_model_match) continue;
    draft_asks_.push_back(
        DraftAsk{seq.id, seq.tokens, std::span<TokenId>(seq.model_draft.data(), size_t(limit))});
    draft_asked_.push_back(&seq);
  }
  if (draft_asks_.empty()) return;
  draft_model_->propose(draft_asks_);
  for (size_t i = 0; i < draft_asks_.size(); ++i)
    draft_asked_[i]->model_draft_len = draft_asks_[i].proposed;
}

int32_t EngineScheduler::propose_draft(SequenceState& seq, std::span<TokenId> out) {
  // Rule: the tokens the sequence's grammar forces, which its output must contain (unless the
  // model spells the same text in other tokens); else the draft model's, when it drafted for the
  // sequence this step (ask_draft_model: no long n-gram match); else its own history; else the
  // shared pool, when the own history matched fewer tokens than a pool key holds (a longer match
  // is the better predictor) or nothing.
  if (seq.constraint) {
    seq.draft_source = DraftSource::kGrammar;
    if (const int32_t forced = seq.constraint->forced_tokens(out); forced > 0) return forced;
  }
  if (seq.model_draft_len > 0) {
    seq.draft_source = DraftSource::kDraftModel;
    const auto n = std::min<int32_t>(seq.model_draft_len, int32_t(out.size()));
    std::copy_n(seq.model_draft.begin(), n, out.begin());
    seq.model_draft_len = 0;
    return n;
  }
  seq.draft_source = DraftSource::kOwnHistory;
  int32_t matched = 0;
  const int32_t own = propose_ngram_draft(seq.tokens, ngram_, out, &matched);
  if (matched >= pool_.context()) return own;
  if (const int32_t pooled = pool_.propose(seq.tokens, seq.cache_namespace, out); pooled > 0) {
    seq.draft_source = DraftSource::kPool;
    return pooled;
  }
  return own;
}

void EngineScheduler::observe_step_seconds(double seconds) {
  executed_seconds_ += seconds;  // the clock of holds for disk room (waits_for_disk)
  // Rule: only steps of decodes alone are measured: a prefill's cost says nothing of drafts'.
  if (config_.spec.mode != SpecMode::kAuto || executed_decoding_ == 0) return;
  (spec_gate_.drafts_allowed(executed_decoding_) ? stats_.spec_auto_steps_with_drafts
                                                 : stats_.spec_auto_steps_without_drafts)++;
  spec_gate_.observe(executed_decoding_, executed_committed_, seconds);
  executed_decoding_ = 0;
}

Status EngineScheduler::roll_back_drafts(SequenceState& seq) {
  // Rule: the rejected drafts' slots go back, and every page only they used, before any page of
  // the step is registered in the prefix cache (cache_full_pages runs after): the pool never
  // caches a rejected token's K/V. Nothing else held those pages (a decode's pages past its
  // committed tokens are its own), and a guaranteed sequence keeps them promised.
  const int32_t slots = seq.kv_slots();
  if (kv_.num_tokens(seq.id) == slots) return Status::Ok();
  Expected<KVRelease> released =
      kv_.compress(seq.id, slots, slots, capacity_.mode() == AdmissionMode::kGuaranteed);
  if (!released.ok()) return released.error();
  log_.record(ProgressEvent::kRelease, seq.id, released->references_dropped, slots);
  return Status::Ok();
}

void EngineScheduler::count_verified(SequenceState& seq, const StepItem& item, int32_t accepted) {
  seq.draft_length.on_verified(item.num_drafts, accepted);
  ++stats_.spec_drafts;
  stats_.spec_draft_tokens += uint64_t(item.num_drafts);
  stats_.spec_accepted_tokens += uint64_t(accepted);
  for (int32_t j = 0; j < accepted && j < kMaxSpecDraftTokens; ++j)
    ++stats_.spec_accepted_by_position[size_t(j)];
  if (seq.draft_source == DraftSource::kPool) {
    stats_.spec_pool_draft_tokens += uint64_t(item.num_drafts);
    stats_.spec_pool_accepted_tokens += uint64_t(accepted);
  } else if (seq.draft_source == DraftSource::kGrammar) {
    stats_.spec_forced_draft_tokens += uint64_t(item.num_drafts);
    stats_.spec_forced_accepted_tokens += uint64_t(accepted);
  } else if (seq.draft_source == DraftSource::kDraftModel) {
    stats_.spec_draft_model_draft_tokens += uint64_t(item.num_drafts);
    stats_.spec_draft_model_accepted_tokens += uint64_t(accepted);
  }
}

void EngineScheduler::commit_tokens(SequenceState& seq, const StepItem& item,
                                    const ItemResult& result) {
  const std::span<const TokenId> drafts = plan_.tokens(item).last(size_t(item.num_drafts));
  for (int32_t j = 0; j < result.accepted_drafts; ++j) {
    std::optional<TokenLogprobs> logprobs;
    if (size_t(j) < result.draft_logprobs.size()) logprobs = result.draft_logprobs[size_t(j)];
    if (commit_token(seq, drafts[size_t(j)], logprobs)) return;
  }
  commit_token(seq, *result.token, result.logprobs);
}

bool EngineScheduler::commit_token(SequenceState& seq, TokenId token,
                                   const std::optional<TokenLogprobs>& logprobs) {
  // Rule: a stop token, a grammar completed or the token limit ends the sequence.
  seq.tokens.push_back(token);
  pool_.record(seq.tokens, seq.tokens.size() - 1, seq.cache_namespace);
  outcomes_.push_back(SequenceOutcome{seq.id, token, std::nullopt, {}, logprobs});
  if (is_stop_token(seq, token)) {
    outcomes_.back().stop_token = true;
    finish(seq, FinishReason::kStop, {});
  } else if (Status s = advance_constraint(seq, token); !s.ok()) {
    finish(seq, FinishReason::kError, s.message());
  } else if (seq.constraint && seq.constraint->complete()) {
    finish(seq, FinishReason::kStop, {});  // the output matched the whole grammar
  } else if (seq.generated_len() >= seq.max_new_tokens) {
    finish(seq, FinishReason::kLength, {});
  } else {
    return false;
  }
  return true;
}

}  // namespace drift
