// The prefix cache's part of the engine scheduler (docs/design-notes.md "Prefix cache and
// sessions (issue 6)", "A disk tier for the KV cache"): the cached run a sequence can start from
// (in RAM, on disk, or being written by another sequence in this step), the full pages a sequence
// hands to the cache, and the pages a sliding window no longer needs.
#include <algorithm>
#include <cassert>

#include "scheduler/engine_scheduler.h"

namespace drift {
namespace {

// Whether a sequence may start its prefill after a cached prefix: not an embedding that pools
// over the whole prompt (mean) or from its first token (cls), which needs those hidden states.
bool may_skip_cached_prefix(const SequenceState& seq) {
  return seq.pooling == PoolingMode::kNone || seq.pooling == PoolingMode::kLast;
}

}  // namespace

CachedPrefix EngineScheduler::find_cached_prefix(const SequenceState& seq) {
  // Rule: the longest cached run of the sequence's full pages, short of its last token.
  CachedPrefix found;
  if (!prefix_ || !may_skip_cached_prefix(seq)) return found;
  prefix_pages_.clear();
  const int32_t max_pages = (seq.total_len() - 1) / kv_.page_size();
  const PrefixHit hit = prefix_->lookup(seq.cache_namespace, seq.tokens, max_pages, prefix_pages_);
  found.num_pages = hit.num_pages;
  found.cursor = hit.cursor;
  count_prefix_pages(found);
  return found;
}

bool EngineScheduler::waits_for_disk(SequenceState& seq, const CachedPrefix& prefix) {
  // Rule: one read per admission; a request whose pages are being read, for it or for another
  // request with the same prefix, waits for them; an ask that found nothing on disk is repeated
  // only once the RAM hit has changed, one that found no page to read into at the next attempt.
  // The read is whole (every row RAM and the disk hold past the hit) while the request may hold
  // for room to take it (holds_for_room); a swapped sequence always waits for that room (being
  // admitted without its pages would recompute them, what the swap was chosen to avoid).
  using Fetch = PrefixDiskTier::Fetch;
  using LoadShape = PrefixDiskTier::LoadShape;
  if (tier_->loading_for(seq.id)) return true;
  if (seq.tier_fetched || !may_skip_cached_prefix(seq) ||
      seq.tier_asked_at_pages == prefix.num_pages)
    return false;
  // Another request is reading the same rows: they join the prefix cache within a step or two.
  if (tier_->loading_after(prefix.cursor, seq.tokens)) return true;
  const int32_t max_pages = (seq.total_len() - 1) / kv_.page_size();
  auto fetch = [&](LoadShape shape) {
    return tier_->fetch(seq.id, seq.cache_namespace, seq.tokens,
                        PrefixHit{prefix.num_pages, prefix.cursor}, prefix.pages, max_pages,
                        seq.swapped_tokens, shape);
  };
  const bool hold_expired = seq.tier_hold_until && executed_seconds_ >= *seq.tier_hold_until;
  const bool may_hold = seq.swapped_tokens == 0 && !hold_expired && may_hold_for_room();
  Fetch fetched = fetch(may_hold ? LoadShape::kWhole : LoadShape::kWhatFits);
  if (may_hold && fetched == Fetch::kNoRoom) {
    if (holds_for_room(seq, prefix, tier_->last_offer())) return true;
    fetched = fetch(LoadShape::kWhatFits);  // a run larger than the pool: never whole
  }
  if (hold_expired) ++stats_.room_holds_expired;
  seq.tier_hold_until.reset();
  if (fetched == Fetch::kNoneOnDisk) seq.tier_asked_at_pages = prefix.num_pages;
  seq.tier_fetched = fetched == Fetch::kReading;
  return seq.tier_fetched || (fetched == Fetch::kNoRoom && seq.swapped_tokens > 0);
}

bool EngineScheduler::may_hold_for_room() const {
  // Room frees only as running sequences finish, and a hold is bounded by what computing costs,
  // which the step cost model must have measured.
  return !running_.empty() && recompute_costs_.measured();
}

bool EngineScheduler::holds_for_room(SequenceState& seq, const CachedPrefix& prefix,
                                     const PrefixDiskTier::Offer& offer) {
  // Rule: hold (may_hold_for_room) while the run can fit the pool at all, for at most the
  // seconds computing it would take by the step cost model — so a request never waits longer
  // than twice the better choice. While held it takes no page and passes its place to requests
  // that fit, within max_overtakes.
  if (offer.pool_pages > kv_.num_pages()) return false;
  if (!seq.tier_hold_until) {
    const int32_t page_size = kv_.page_size();
    seq.tier_hold_until = executed_seconds_ + prefill_seconds(recompute_costs_,
                                                              int64_t(prefix.num_pages) * page_size,
                                                              int64_t(offer.rows) * page_size);
    ++stats_.room_holds;
  }
  return true;
}

void EngineScheduler::count_prefix_pages(CachedPrefix& prefix) const {
  // A page taken from the cached list leaves the pool and is paid by the sequence; a full
  // group's page is held for good; a sliding page shared from a running sequence is neither.
  prefix.pages = prefix_pages_;
  prefix.num_from_pool = prefix.num_promised = 0;
  const int32_t groups = kv_.layout().num_groups();
  for (size_t i = 0; i < prefix_pages_.size(); ++i) {
    const PageId p = prefix_pages_[i];
    if (p == kNoPage) continue;
    const bool from_pool = kv_.page_state(p) == PageState::kCached;
    prefix.num_from_pool += from_pool;
    prefix.num_promised += from_pool || !kv_.layout().group(int32_t(i) % groups).sliding();
  }
}

bool EngineScheduler::share_pages_in_flight(CachedPrefix& prefix, const SequenceState& writer,
                                            int32_t num_pages) {
  // Rule: the sequence holds, in each group, what it would had it computed the shared pages
  // itself: a full group every page, a sliding group only the pages its next query (after the
  // shared pages) sees, kNoPage below, so a page of the cached hit's window that falls below
  // the later window is not taken. The writer holds every page of that window: its own next
  // query, before this step's item, is earlier (it had not yet written the first shared page),
  // and pages leave a window only after a reported step.
  const KVLayout& layout = kv_.layout();
  const auto groups = size_t(layout.num_groups());
  const int32_t shared = prefix.num_pages + num_pages;
  prefix_pages_.resize(size_t(shared) * groups);
  for (size_t g = 0; g < groups; ++g) {
    std::span<const PageId> written = kv_.pages(writer.id, int32_t(g));
    const int64_t first_seen =
        layout.first_page_seen(int32_t(g), int64_t(shared) * kv_.page_size());
    for (int32_t i = 0; i < shared; ++i) {
      PageId& page = prefix_pages_[size_t(i) * groups + g];
      if (i >= prefix.num_pages) page = written[size_t(i)];
      if (i < first_seen) page = kNoPage;
      if (i >= first_seen && page == kNoPage) return false;  // never a freed page
    }
  }
  prefix.num_pages = shared;
  count_prefix_pages(prefix);
  return true;
}

EngineScheduler::PagesInFlight EngineScheduler::pages_in_flight(const SequenceState& seq,
                                                                int32_t cached_pages) const {
  // Rule: page `cached_pages` of `seq` is in flight if a running prefill with the same tokens up
  // to its end has not computed it yet; `seq` can share that page and the writer's next ones as
  // far as their tokens agree (short of `seq`'s last token, which it computes for its logits).
  // The writer registers them once it reports them; a compressed writer never does (its pages
  // are compacted in place), so no one waits for or shares its pages.
  PagesInFlight found;
  if (!prefix_ || !may_skip_cached_prefix(seq)) return found;
  const int32_t page_size = kv_.page_size();
  auto same_page = [&](const SequenceState& r, int32_t page) {
    const int32_t end = (page + 1) * page_size;
    if (end > seq.total_len() - 1 || end > r.total_len()) return false;
    return std::ranges::equal(
        std::span<const TokenId>(r.tokens.data() + end - page_size, size_t(page_size)),
        std::span<const TokenId>(seq.tokens.data() + end - page_size, size_t(page_size)));
  };
  const int32_t end = (cached_pages + 1) * page_size;
  for (const SequenceState* r : running_) {
    if (r->phase != SequencePhase::kPrefill || r->cache_namespace != seq.cache_namespace ||
        r->num_computed_tokens >= end || r->prefix.broken || r->kv_compressed())
      continue;
    // The cached pages are the same content for both (a hit chains every page before it).
    // same_page first: it checks that the writer's prompt reaches `end`.
    if (!same_page(*r, cached_pages) ||
        !std::ranges::equal(std::span<const TokenId>(r->tokens.data(), size_t(end - page_size)),
                            std::span<const TokenId>(seq.tokens.data(), size_t(end - page_size))))
      continue;
    found.writer = r;
    found.num_pages = 1;
    while (same_page(*r, cached_pages + found.num_pages)) ++found.num_pages;
    // kv_.num_tokens counts the slots bound to the writer, this step's item included.
    const int64_t written =
        r->last_scheduled_step == step_ ? kv_.num_tokens(r->id) : r->num_computed_tokens;
    found.written_this_step = written >= int64_t(cached_pages + found.num_pages) * page_size &&
                              int64_t(kv_.pages(r->id).size()) >= cached_pages + found.num_pages;
    return found;
  }
  return found;
}

void EngineScheduler::cache_full_pages(SequenceState& seq) {
  // Rule: a page is registered as soon as the executor reported all its tokens written.
  if (!prefix_) return;
  // A compressed sequence's slots no longer hold the tokens of their page's positions: its pages
  // are no plain prefix (its prefix-cache hit, below kv_keep_from, stays registered).
  if (seq.kv_compressed()) return;
  const int32_t page_size = kv_.page_size();
  const int32_t full = seq.num_computed_tokens / page_size;
  while (seq.prefix.num_pages < full && !seq.prefix.broken) {
    const size_t i = size_t(seq.prefix.num_pages);
    std::span<const TokenId> tokens(seq.tokens.data() + i * size_t(page_size), size_t(page_size));
    for (int32_t g = 0; g < kv_.layout().num_groups(); ++g)
      page_row_[size_t(g)] = kv_.pages(seq.id, g)[i];
    seq.prefix = prefix_->insert(seq.prefix, tokens, page_row_);
  }
}

void EngineScheduler::free_outside_windows(const SequenceState& seq) {
  // Rule: after a step, the sliding groups' pages below what the next query sees go back to the
  // pool (registered ones to the cached list: the prefix cache registered them first). A
  // compressed sequence's slots are no longer positions: it frees nothing by window.
  if (!kv_.layout().has_sliding_groups() || seq.kv_compressed()) return;
  const KVRelease freed = kv_.free_outside_window(seq.id, seq.num_computed_tokens);
  if (freed.references_dropped > 0)
    log_.record(ProgressEvent::kRelease, seq.id, freed.references_dropped,
                freed.reservation_regained);
}

}  // namespace drift
