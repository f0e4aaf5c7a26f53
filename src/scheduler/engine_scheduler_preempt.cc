// Preemption (docs/design-notes.md "Tiered preemption"): when a running sequence needs a page and
// none is left (optimistic admission), a lower-ranked one gives its pages back. Its tokens stay;
// its K/V is either recomputed at re-admission or — with a disk tier, when the cost model
// (preemption_cost.h) predicts it faster — written to the tier now and read back at
// re-admission, which asks the tier again like any admission.
#include <algorithm>
#include <cassert>

#include "scheduler/engine_scheduler.h"

namespace drift {

bool EngineScheduler::make_room(SequenceState& seq, int64_t tokens) {
  // Rule: preempt the lowest-ranked running sequence below `seq` that is not in this step, one at
  // a time, until `tokens` fit (optimistic mode only; guaranteed sequences always fit).
  while (kv_.appendable_tokens(seq.id) < tokens) {
    if (capacity_.mode() != AdmissionMode::kOptimistic) return false;
    std::optional<size_t> victim = capacity_.choose_victim(running_, seq, step_);
    if (!victim) return false;
    preempt(*victim);
  }
  return true;
}

void EngineScheduler::preempt(size_t running_index) {
  // Rule: free the pages, keep the tokens, requeue at the old rank; the pages are swapped out to
  // the disk tier first when that is predicted faster than recomputing them.
  SequenceState& seq = *running_[running_index];
  const PreemptionChoice choice = swap_out_or_recompute(seq);
  seq.swapped_tokens = choice.mode == PreemptionMode::kSwap ? seq.num_computed_tokens : 0;
  std::optional<KVRelease> released = capacity_.preempt(seq.id);
  assert(released);
  log_.record(ProgressEvent::kPreempt, seq.id, seq.total_len(), int64_t(choice.mode));
  log_.record(ProgressEvent::kRelease, seq.id, released->references_dropped,
              released->reservation_returned);
  if (seq.phase == SequencePhase::kPrefill) --partial_prefills_;
  if (seq.kv_compressed()) plan_.kv_tables_released.push_back(seq.id);
  if (draft_model_) draft_model_->release(seq.id);
  seq.num_computed_tokens = 0;
  seq.kv_evicted = 0;
  seq.prefix = PrefixCursor{};
  seq.tier_fetched = false;  // its pages evicted meanwhile may be read back
  seq.tier_asked_at_pages.reset();
  seq.tier_hold_until.reset();
  ++seq.num_preemptions;
  running_.erase(running_.begin() + std::ptrdiff_t(running_index));
  enqueue_waiting(seq);
}

PreemptionChoice EngineScheduler::swap_out_or_recompute(const SequenceState& seq) {
  // Rule: every computed position's page goes to the tier, the partial last page too (a running
  // sequence's last token is never computed, so a re-admission computes at least that one and
  // has logits to sample from), and only from a sequence whose slots hold positions (not
  // KV-compressed) that may start after a cached prefix (no pooled embedding).
  PreemptionChoice choice;
  if (tier_ && seq.num_computed_tokens > 0 && !seq.kv_compressed() && !seq.embeds()) {
    const KVDiskStats disk = tier_->store().stats();
    const SwapPages moved =
        tier_->swap_pages(seq.id, seq.cache_namespace, seq.tokens, seq.num_computed_tokens);
    PreemptionCostInputs in;
    in.tokens = seq.num_computed_tokens;
    in.pages = moved.pages;
    in.pages_to_write = moved.to_write;
    in.file_bytes = tier_->store().file_bytes();
    if (disk.write_seconds > 0)
      in.disk.write_bytes_per_second = double(disk.bytes_written) / disk.write_seconds;
    if (disk.read_seconds > 0)
      in.disk.read_bytes_per_second = double(disk.bytes_read) / disk.read_seconds;
    in.recompute = recompute_costs_;
    choice = choose_preemption(config_.preemption, in);
    stats_.predicted_swap_seconds += choice.swap_seconds;
    stats_.predicted_recompute_seconds += choice.recompute_seconds;
    stats_.last_preemption = choice;
  }
  if (choice.mode == PreemptionMode::kSwap) {
    tier_->swap_out(seq.id, seq.cache_namespace, seq.tokens, seq.num_computed_tokens);
    ++stats_.preemptions_swapped;
  } else {
    ++stats_.preemptions_recomputed;
  }
  return choice;
}

int32_t EngineScheduler::swapped_tail_tokens(const SequenceState& seq, const CachedPrefix& prefix) {
  // Rule: the page continues the prefix only where the pages before it are the sequence's own
  // prefix; pages evicted again since they were read leave it nothing to continue.
  const SwapTail* tail = tier_ ? tier_->tail_for(seq.id) : nullptr;
  if (!tail) return 0;
  if (tail->page_index != prefix.num_pages) {
    tier_->drop_tail(seq.id);
    return 0;
  }
  return tail->num_tokens;
}

void EngineScheduler::restore_swapped_tail(SequenceState& seq) {
  // Rule: the sequence takes a page row of its own for the tail's tokens and the executor copies
  // the tier's pages into it before the step's items run (as a copy-on-write); the tier lets go
  // of them once the step is reported.
  const SwapTail tail = *tier_->tail_for(seq.id);
  tier_->take_tail(seq.id);
  if (!kv_.append(seq.id, tail.num_tokens, &plan_.page_copies)) {
    assert(false && "admitted without room for its swapped tail");
    return;
  }
  for (int32_t g = 0; g < kv_.layout().num_groups(); ++g)
    plan_.page_copies.push_back(
        PageCopy{kv_.pages(tail.holder, g)[0], kv_.pages(seq.id, g).back()});
  seq.num_computed_tokens += tail.num_tokens;
  ++stats_.swapped_tails_restored;
}

}  // namespace drift
