#include "kv/prefix_disk_tier.h"

#include <algorithm>

namespace drift {
namespace {

KVDiskPageKey key_of(const EvictedPrefixPage& page) {
  KVDiskPageKey key{page.digest, page.parent_digest, page.cache_namespace, page.hash,
                    page.parent_hash};
  key.group = page.group;
  return key;
}

}  // namespace

Expected<std::unique_ptr<PrefixDiskTier>> PrefixDiskTier::create(KVCacheManager& kv,
                                                                 PrefixCache& cache,
                                                                 KVDiskStore& store,
                                                                 KVPageMemory& memory) {
  if (memory.page_bytes() != store.config().page_bytes ||
      store.config().page_size != kv.page_size())
    return make_error("kv cache dir: pages of {} bytes and {} tokens, the store expects {} and {}",
                      memory.page_bytes(), kv.page_size(), store.config().page_bytes,
                      store.config().page_size);
  if (cache.num_registered() != 0)
    return make_error("kv cache dir: the prefix cache already holds pages");
  return std::unique_ptr<PrefixDiskTier>(new PrefixDiskTier(kv, cache, store, memory));
}

PrefixDiskTier::PrefixDiskTier(KVCacheManager& kv, PrefixCache& cache, KVDiskStore& store,
                               KVPageMemory& memory)
    : kv_(kv), cache_(cache), store_(store), memory_(memory) {
  cache_.set_digest_seed(store_.digest_seed());
  cache_.set_spill_listener(this);
}

PrefixDiskTier::~PrefixDiskTier() {
  cache_.set_spill_listener(nullptr);
  // Reads still running write into pages of this tier's sequences: let them end first.
  store_.drain();
  for (const Load& load : loads_) {
    kv_.release(load.seq);
    if (load.tail) kv_.release(load.tail->holder);
  }
  for (const SwapTail& t : ready_tails_) kv_.release(t.holder);
  for (const SwapTail& t : taken_tails_) kv_.release(t.holder);
}

void PrefixDiskTier::on_prefix_page_evicted(const EvictedPrefixPage& page) {
  // Rule: the bytes are copied now (the page is reused right after); the file is written later
  // on the store's thread. With every staging slot taken, the eviction waits for one: a dropped
  // write is a page computed again later (seconds of prefill), a wait one file write.
  if (store_.write(key_of(page), page.tokens, memory_.page(page.page), /*wait_for_slot=*/true)) {
    ++stats_.pages_spilled;
  } else {
    ++stats_.spill_skipped;
  }
}

int32_t PrefixDiskTier::write_ahead(int32_t pages_at_risk) {
  // Rule: the pages the pool reclaims first go first; a full staging set ends the walk (the next
  // step boundary continues it), so write-ahead never drops a write.
  int32_t free_slots = pages_at_risk > 0 ? store_.num_free_slots() : 0;
  int32_t queued = 0;
  PageId p = kv_.first_cached_page();
  for (int32_t i = 0; i < pages_at_risk && free_slots > 0 && p != kNoPage; ++i) {
    if (cache_.registered(p)) {
      const EvictedPrefixPage page = cache_.describe(p);
      if (!store_.holds(page.digest, page.group) &&
          store_.write(key_of(page), page.tokens, memory_.page(p))) {
        ++queued;
        --free_slots;
      }
    }
    p = kv_.next_cached_page(p);
  }
  stats_.pages_spilled += uint64_t(queued);
  stats_.pages_written_ahead += uint64_t(queued);
  return queued;
}

SwapPages PrefixDiskTier::swap_pages(SeqId seq, uint64_t cache_namespace,
                                     std::span<const TokenId> tokens, int32_t num_tokens) const {
  const int32_t groups = kv_.layout().num_groups();
  const int32_t page_size = kv_.page_size();
  const int32_t full = num_tokens / page_size;
  SwapPages moved;
  KVDigest digest = cache_.root(cache_namespace).digest;
  for (int32_t i = 0; i < (num_tokens + page_size - 1) / page_size; ++i) {
    if (i < full)
      digest = kv_digest_next(digest, tokens.subspan(size_t(i * page_size), size_t(page_size)));
    for (int32_t g = 0; g < groups; ++g) {
      std::span<const PageId> pages = kv_.pages(seq, g);
      if (size_t(i) >= pages.size() || pages[size_t(i)] == kNoPage) continue;
      ++moved.pages;
      moved.to_write += i == full || !store_.holds(digest, g);  // the partial row is never there
    }
  }
  return moved;
}

int32_t PrefixDiskTier::swap_out(SeqId seq, uint64_t cache_namespace,
                                 std::span<const TokenId> tokens, int32_t num_tokens) {
  // Rule: the chain is walked from the namespace's root over the sequence's own tokens, so a
  // page is named as fetch will look for it whether or not the prefix cache registered it; a
  // sliding group's pages it no longer holds are below its window, which a resume does not read.
  const int32_t groups = kv_.layout().num_groups();
  const auto page_size = size_t(kv_.page_size());
  const size_t num_pages = size_t(num_tokens) / page_size;
  const PrefixCursor root = cache_.root(cache_namespace);
  KVDiskPageKey key{root.digest, root.digest, cache_namespace, root.hash, std::nullopt};
  int32_t queued = 0;
  auto page_of = [&](int32_t g, size_t i) {
    std::span<const PageId> pages = kv_.pages(seq, g);
    return i < pages.size() ? pages[i] : kNoPage;
  };
  for (size_t i = 0; i < num_pages && page_of(0, i) != kNoPage; ++i) {
    std::span<const TokenId> page_tokens = tokens.subspan(i * page_size, page_size);
    key.parent = key.digest;
    key.parent_hash = i == 0 ? std::nullopt : std::optional<uint64_t>(key.hash);
    key.digest = kv_digest_next(key.parent, page_tokens);
    key.hash = cache_.chain_hash(i == 0 ? root.hash : *key.parent_hash, page_tokens);
    for (int32_t g = 0; g < groups; ++g) {
      const PageId page = page_of(g, i);
      if (page == kNoPage || store_.holds(key.digest, g)) continue;
      KVDiskPageKey group_key = key;
      group_key.group = g;
      if (g > 0) group_key.parent_hash.reset();  // as PrefixCache::describe names it
      queued += store_.write(group_key, page_tokens, memory_.page(page), /*wait_for_slot=*/true);
    }
  }
  // The partial last row, named by the digest of its own tokens after the full pages' (a page
  // of fewer tokens is never a full page's digest), as fetch looks for it.
  if (const size_t tail = size_t(num_tokens) % page_size;
      tail > 0 && page_of(0, num_pages) != kNoPage) {
    std::span<const TokenId> tail_tokens = tokens.subspan(num_pages * page_size, tail);
    int32_t written = 0;
    for (int32_t g = 0; g < groups; ++g) {
      const KVDiskPageKey tail_key{kv_digest_next(key.digest, tail_tokens),
                                   key.digest,
                                   cache_namespace,
                                   0,
                                   std::nullopt,
                                   false,
                                   g};
      written += store_.write(tail_key, tail_tokens, memory_.page(page_of(g, num_pages)),
                              /*wait_for_slot=*/true);
    }
    queued += written;
    stats_.tails_swapped_out += written > 0;
  }
  ++stats_.swaps;
  stats_.pages_swapped_out += uint64_t(queued);
  stats_.pages_spilled += uint64_t(queued);
  return queued;
}

bool PrefixDiskTier::loading_for(SeqId waiter) const {
  return std::any_of(loads_.begin(), loads_.end(),
                     [&](const Load& l) { return l.waiter == waiter; });
}

bool PrefixDiskTier::loading_after(const PrefixCursor& hit, std::span<const TokenId> tokens) const {
  // Rule: same chain up to the hit (namespace, rows and digest) and the same next row.
  const auto page_size = size_t(kv_.page_size());
  const size_t begin = size_t(hit.num_pages) * page_size;
  if (begin + page_size > tokens.size()) return false;
  const std::span<const TokenId> next = tokens.subspan(begin, page_size);
  return std::any_of(loads_.begin(), loads_.end(), [&](const Load& l) {
    return l.cursor.cache_namespace == hit.cache_namespace &&
           l.cursor.num_pages == hit.num_pages && l.cursor.digest == hit.digest &&
           l.tokens.size() >= page_size && std::equal(next.begin(), next.end(), l.tokens.begin());
  });
}

int32_t PrefixDiskTier::complete_loads() {
  // Tails taken by an admission in the step just reported: the executor has copied them.
  for (const SwapTail& t : taken_tails_) kv_.release(t.holder);
  taken_tails_.clear();
  if (loads_.empty()) return 0;
  completed_.clear();
  store_.take_completed(completed_);
  for (const auto& [ticket, ok] : completed_) complete_read(ticket, ok);
  const uint64_t before = stats_.pages_loaded;
  for (size_t i = 0; i < loads_.size();) {
    if (loads_[i].pending > 0) {
      ++i;
      continue;
    }
    finish(loads_[i]);
    loads_.erase(loads_.begin() + std::ptrdiff_t(i));
  }
  return int32_t(stats_.pages_loaded - before);
}

void PrefixDiskTier::complete_read(uint64_t ticket, bool ok) {
  for (Load& load : loads_) {
    if (load.tail) {
      auto t = std::find(load.tail->tickets.begin(), load.tail->tickets.end(), ticket);
      if (t != load.tail->tickets.end()) {
        load.tail->good = load.tail->good && ok;
        --load.tail->pending;
        --load.pending;
        return;
      }
    }
    auto it = std::find(load.tickets.begin(), load.tickets.end(), ticket);
    if (it == load.tickets.end()) continue;
    const auto page = size_t(load.ticket_pages[size_t(it - load.tickets.begin())]);
    load.reads[page] = ok ? PageRead::kGood : PageRead::kBad;
    --load.pending;
    return;
  }
}

void PrefixDiskTier::finish(Load& load) {
  // Rule: register the rows in chain order: a full group's page read bad ends the chain (the
  // rows after it hang on it); a sliding group's page read bad is left out of its row (the next
  // lookup cuts the hit back to where its windows are whole). Then the load lets go of
  // everything.
  const KVLayout& layout = kv_.layout();
  const auto groups = size_t(layout.num_groups());
  const auto page_size = size_t(kv_.page_size());
  const size_t rows = load.rows.size() / groups;
  PrefixCursor at = load.cursor;
  row_scratch_.resize(groups);
  size_t registered = 0;
  for (; registered < rows; ++registered) {
    bool chain_ends = false;
    for (size_t g = 0; g < groups; ++g) {
      const PageRead read = load.reads[registered * groups + g];
      chain_ends = chain_ends || (read == PageRead::kBad && !layout.group(int32_t(g)).sliding());
      row_scratch_[g] = read == PageRead::kBad ? kNoPage : load.rows[registered * groups + g];
    }
    if (chain_ends) break;
    const PrefixCursor next = cache_.insert(
        at, std::span<const TokenId>(load.tokens).subspan(registered * page_size, page_size),
        row_scratch_);
    if (next.broken) break;
    at = next;
  }
  bool all_good = registered == rows;
  for (size_t i = 0; i < load.reads.size(); ++i) {
    const PageRead read = load.reads[i];
    if (read != PageRead::kGood && read != PageRead::kBad) continue;
    const bool loaded = read == PageRead::kGood && i / groups < registered;
    all_good = all_good && loaded;
    ++(loaded ? stats_.pages_loaded : stats_.pages_load_failed);
  }
  if (load.tail) {
    // Usable only after every page before it: its K/V attends over theirs.
    if (load.tail->good && !load.tail->abandoned && all_good) {
      ready_tails_.push_back(SwapTail{load.waiter, load.tail->holder, load.tail->page_index,
                                      int32_t(load.tail->tokens.size())});
      ++stats_.tails_loaded;
    } else {
      kv_.release(load.tail->holder);
      stats_.pages_load_failed += groups;
    }
  }
  kv_.release(load.seq);
}

const SwapTail* PrefixDiskTier::tail_for(SeqId waiter) const {
  auto it = std::find_if(ready_tails_.begin(), ready_tails_.end(),
                         [&](const SwapTail& t) { return t.waiter == waiter; });
  return it == ready_tails_.end() ? nullptr : &*it;
}

void PrefixDiskTier::take_tail(SeqId waiter) {
  auto it = std::find_if(ready_tails_.begin(), ready_tails_.end(),
                         [&](const SwapTail& t) { return t.waiter == waiter; });
  if (it == ready_tails_.end()) return;
  taken_tails_.push_back(*it);
  ready_tails_.erase(it);
}

void PrefixDiskTier::drop_tail(SeqId waiter) {
  // A tail still being read is let go when its read ends (the I/O thread writes its page).
  for (Load& load : loads_)
    if (load.waiter == waiter && load.tail) load.tail->abandoned = true;
  auto it = std::find_if(ready_tails_.begin(), ready_tails_.end(),
                         [&](const SwapTail& t) { return t.waiter == waiter; });
  if (it == ready_tails_.end()) return;
  kv_.release(it->holder);
  ready_tails_.erase(it);
}

int32_t PrefixDiskTier::write_back_cached() {
  // Rule: least recently used first, so that the disk's LRU order continues RAM's; only the most
  // recent pages that fit the budget.
  const std::vector<PageId> cached = kv_.cached_pages_in_order();
  const auto fit = int64_t(store_.config().budget_bytes / store_.file_bytes());
  const int64_t skip = std::max<int64_t>(0, int64_t(cached.size()) - fit);
  int32_t queued = 0;
  for (size_t i = size_t(skip); i < cached.size(); ++i) {
    const PageId p = cached[i];
    if (!cache_.registered(p)) continue;
    const EvictedPrefixPage page = cache_.describe(p);
    if (store_.write(key_of(page), page.tokens, memory_.page(p), /*wait_for_slot=*/true)) ++queued;
  }
  stats_.pages_spilled += uint64_t(queued);
  return queued;
}

}  // namespace drift
