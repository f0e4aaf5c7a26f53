#include "kv/prefix_disk_tier.h"

#include <algorithm>

namespace drift {
namespace {

KVDiskPageKey key_of(const EvictedPrefixPage& page) {
  return KVDiskPageKey{page.digest, page.parent_digest, page.cache_namespace, page.hash,
                       page.parent_hash};
}

}  // namespace

Expected<std::unique_ptr<PrefixDiskTier>> PrefixDiskTier::create(KVCacheManager& kv,
                                                                 PrefixCache& cache,
                                                                 KVDiskStore& store,
                                                                 KVPageMemory& memory) {
  if (kv.layout().num_groups() != 1)
    return make_error(
        "kv cache dir: the disk tier keeps pages of one KV group, and this model's layers form "
        "{} (sliding-window layers); run it with --no-hybrid-kv to use the tier",
        kv.layout().num_groups());
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
  // on the store's thread.
  if (store_.write(key_of(page), page.tokens, memory_.page(page.page))) {
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
      if (!store_.holds(page.digest) && store_.write(key_of(page), page.tokens, memory_.page(p))) {
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

PrefixDiskTier::Fetch PrefixDiskTier::fetch(SeqId waiter, uint64_t cache_namespace,
                                            std::span<const TokenId> tokens, const PrefixHit& hit,
                                            std::span<const PageId> hit_pages, int32_t max_pages,
                                            int32_t swapped_tokens) {
  // Rule: read the longest run of pages after the RAM hit whose digests chain from it on disk,
  // into pages the pool can spare now (never a reserved one); and a swapped sequence's partial
  // last page if that run reaches it.
  const auto page_size = size_t(kv_.page_size());
  Load load;
  load.waiter = waiter;
  load.cursor = hit.cursor;
  KVDigest parent = hit.cursor.digest;
  int32_t i = hit.num_pages;
  for (; i < max_pages; ++i) {
    const size_t begin = size_t(i) * page_size;
    if (begin + page_size > tokens.size()) break;
    std::span<const TokenId> page_tokens = tokens.subspan(begin, page_size);
    const KVDigest digest = kv_digest_next(parent, page_tokens);
    if (!store_.contains(digest, parent, cache_namespace)) break;
    load.tokens.insert(load.tokens.end(), page_tokens.begin(), page_tokens.end());
    load.digests.push_back(digest);
    parent = digest;
  }
  std::optional<Tail> tail;
  if (swapped_tokens % int32_t(page_size) > 0 && i == swapped_tokens / int32_t(page_size))
    tail = find_tail(cache_namespace, tokens, parent, swapped_tokens);
  int64_t hit_cached = 0;  // pages of the hit that leave the pool when the load holds them
  for (PageId p : hit_pages) hit_cached += kv_.page_state(p) == PageState::kCached;
  const int64_t room = kv_.num_available_pages() - hit_cached;
  const auto n = int32_t(std::min<int64_t>(int64_t(load.digests.size()), room));
  if (load.digests.empty() && !tail) return Fetch::kNoneOnDisk;
  if (n < int32_t(load.digests.size()) || room < n + 1) tail.reset();  // no page left for it
  if (n <= 0 && !tail) return Fetch::kNoRoom;
  load.digests.resize(size_t(n));
  load.tokens.resize(size_t(n) * page_size);

  while (kv_.contains(next_seq_)) ++next_seq_;
  load.seq = next_seq_++;
  if (!kv_.open(load.seq, int64_t(hit.num_pages + n) * int64_t(page_size)).ok())
    return Fetch::kNoRoom;
  bool held = true;
  for (PageId p : hit_pages) held = held && kv_.share_page(load.seq, p).ok();
  if (!held || (n > 0 && !kv_.append(load.seq, n * int32_t(page_size))) ||
      (tail && !read_tail(*tail, parent, cache_namespace))) {
    kv_.release(load.seq);
    return Fetch::kNoRoom;
  }
  load.tail = tail;
  std::span<const PageId> pages = kv_.pages(load.seq, 0);
  load.pages.assign(pages.begin() + hit.num_pages, pages.end());
  for (int32_t j = 0; j < n; ++j) {
    const KVDiskPageKey key{load.digests[size_t(j)],
                            j == 0 ? hit.cursor.digest : load.digests[size_t(j) - 1],
                            cache_namespace, 0, std::nullopt};
    load.tickets.push_back(store_.read(
        key, std::span<const TokenId>(load.tokens).subspan(size_t(j) * page_size, page_size),
        memory_.page(load.pages[size_t(j)])));
  }
  load.state.assign(size_t(n), 0);
  load.pending = n + (tail ? 1 : 0);
  loads_.push_back(std::move(load));
  ++stats_.loads;
  return Fetch::kReading;
}

std::optional<PrefixDiskTier::Tail> PrefixDiskTier::find_tail(uint64_t cache_namespace,
                                                              std::span<const TokenId> tokens,
                                                              const KVDigest& parent,
                                                              int32_t swapped_tokens) const {
  const int32_t page_size = kv_.page_size();
  Tail tail;
  tail.page_index = swapped_tokens / page_size;
  tail.tokens.assign(tokens.begin() + tail.page_index * page_size, tokens.begin() + swapped_tokens);
  tail.digest = kv_digest_next(parent, tail.tokens);
  if (!store_.contains(tail.digest, parent, cache_namespace)) return std::nullopt;
  return tail;
}

bool PrefixDiskTier::read_tail(Tail& tail, const KVDigest& parent, uint64_t cache_namespace) {
  // Its own sequence holds the page: the load's pages go to the prefix cache when it finishes,
  // the tail waits for its sequence's admission.
  while (kv_.contains(next_seq_)) ++next_seq_;
  tail.holder = next_seq_++;
  if (!kv_.open(tail.holder, kv_.page_size()).ok()) return false;
  if (!kv_.append(tail.holder, kv_.page_size())) {
    kv_.release(tail.holder);
    return false;
  }
  tail.page = kv_.pages(tail.holder, 0)[0];
  const KVDiskPageKey key{tail.digest, parent, cache_namespace, 0, std::nullopt};
  tail.ticket = store_.read(key, tail.tokens, memory_.page(tail.page));
  return true;
}

int32_t PrefixDiskTier::pages_not_on_disk(uint64_t cache_namespace, std::span<const TokenId> tokens,
                                          int32_t num_pages) const {
  const auto page_size = size_t(kv_.page_size());
  KVDigest digest = cache_.root(cache_namespace).digest;
  int32_t missing = 0;
  for (size_t i = 0; i < size_t(num_pages); ++i) {
    digest = kv_digest_next(digest, tokens.subspan(i * page_size, page_size));
    missing += !store_.holds(digest);
  }
  return missing;
}

int32_t PrefixDiskTier::swap_out(uint64_t cache_namespace, std::span<const TokenId> tokens,
                                 std::span<const PageId> pages, int32_t num_tokens) {
  // Rule: the chain is walked from the namespace's root over the sequence's own tokens, so a
  // page is named as fetch will look for it whether or not the prefix cache registered it.
  const auto page_size = size_t(kv_.page_size());
  const size_t num_pages = size_t(num_tokens) / page_size;
  const PrefixCursor root = cache_.root(cache_namespace);
  KVDiskPageKey key{root.digest, root.digest, cache_namespace, root.hash, std::nullopt};
  int32_t queued = 0;
  for (size_t i = 0; i < num_pages && i < pages.size(); ++i) {
    std::span<const TokenId> page_tokens = tokens.subspan(i * page_size, page_size);
    key.parent = key.digest;
    key.parent_hash = i == 0 ? std::nullopt : std::optional<uint64_t>(key.hash);
    key.digest = kv_digest_next(key.parent, page_tokens);
    key.hash = cache_.chain_hash(i == 0 ? root.hash : *key.parent_hash, page_tokens);
    if (store_.holds(key.digest)) continue;
    queued += store_.write(key, page_tokens, memory_.page(pages[i]), /*wait_for_slot=*/true);
  }
  // The partial last page, named by the digest of its own tokens after the full pages' (a page
  // of fewer tokens is never a full page's digest), as fetch looks for it.
  if (const size_t tail = size_t(num_tokens) % page_size; tail > 0 && num_pages < pages.size()) {
    std::span<const TokenId> tail_tokens = tokens.subspan(num_pages * page_size, tail);
    const KVDiskPageKey tail_key{kv_digest_next(key.digest, tail_tokens), key.digest,
                                 cache_namespace, 0, std::nullopt};
    if (store_.write(tail_key, tail_tokens, memory_.page(pages[num_pages]),
                     /*wait_for_slot=*/true)) {
      ++queued;
      ++stats_.tails_swapped_out;
    }
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

int32_t PrefixDiskTier::complete_loads() {
  // Tails taken by an admission in the step just reported: the executor has copied them.
  for (const SwapTail& t : taken_tails_) kv_.release(t.holder);
  taken_tails_.clear();
  if (loads_.empty()) return 0;
  completed_.clear();
  store_.take_completed(completed_);
  for (const auto& [ticket, ok] : completed_) {
    for (Load& load : loads_) {
      if (load.tail && load.tail->ticket == ticket) {
        load.tail->good = ok;
        --load.pending;
        break;
      }
      auto it = std::find(load.tickets.begin(), load.tickets.end(), ticket);
      if (it == load.tickets.end()) continue;
      load.state[size_t(it - load.tickets.begin())] = ok ? 1 : -1;
      --load.pending;
      break;
    }
  }
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

void PrefixDiskTier::finish(Load& load) {
  // Rule: register the pages read good in chain order; the first bad one ends the chain (the
  // pages after it hang on it); then the load lets go of everything.
  const auto page_size = size_t(kv_.page_size());
  PrefixCursor at = load.cursor;
  size_t good = 0;
  for (; good < load.pages.size(); ++good) {
    if (load.state[good] != 1) break;
    const PrefixCursor next = cache_.insert(
        at, std::span<const TokenId>(load.tokens).subspan(good * page_size, page_size),
        load.pages[good]);
    if (next.broken) break;
    at = next;
  }
  stats_.pages_loaded += good;
  stats_.pages_load_failed += load.pages.size() - good;
  if (load.tail) {
    // Usable only after every page before it: its K/V attends over theirs.
    if (load.tail->good && !load.tail->abandoned && good == load.pages.size() && !at.broken) {
      ready_tails_.push_back(SwapTail{load.waiter, load.tail->holder, load.tail->page_index,
                                      int32_t(load.tail->tokens.size()), load.tail->page});
      ++stats_.tails_loaded;
    } else {
      kv_.release(load.tail->holder);
      ++stats_.pages_load_failed;
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
