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
  for (const Load& load : loads_) kv_.release(load.seq);
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

bool PrefixDiskTier::fetch(SeqId waiter, uint64_t cache_namespace, std::span<const TokenId> tokens,
                           const PrefixHit& hit, std::span<const PageId> hit_pages,
                           int32_t max_pages) {
  // Rule: read the longest run of pages after the RAM hit whose digests chain from it on disk,
  // into pages the pool can spare now (never a reserved one).
  const auto page_size = size_t(kv_.page_size());
  Load load;
  load.waiter = waiter;
  load.cursor = hit.cursor;
  KVDigest parent = hit.cursor.digest;
  for (int32_t i = hit.num_pages; i < max_pages; ++i) {
    const size_t begin = size_t(i) * page_size;
    if (begin + page_size > tokens.size()) break;
    std::span<const TokenId> page_tokens = tokens.subspan(begin, page_size);
    const KVDigest digest = kv_digest_next(parent, page_tokens);
    if (!store_.contains(digest, parent, cache_namespace)) break;
    load.tokens.insert(load.tokens.end(), page_tokens.begin(), page_tokens.end());
    load.digests.push_back(digest);
    parent = digest;
  }
  int64_t hit_cached = 0;  // pages of the hit that leave the pool when the load holds them
  for (PageId p : hit_pages) hit_cached += kv_.page_state(p) == PageState::kCached;
  const auto n = int32_t(
      std::min<int64_t>(int64_t(load.digests.size()), kv_.num_available_pages() - hit_cached));
  if (n <= 0) return false;
  load.digests.resize(size_t(n));
  load.tokens.resize(size_t(n) * page_size);

  while (kv_.contains(next_seq_)) ++next_seq_;
  load.seq = next_seq_++;
  if (!kv_.open(load.seq, int64_t(hit.num_pages + n) * int64_t(page_size)).ok()) return false;
  bool held = true;
  for (PageId p : hit_pages) held = held && kv_.share_page(load.seq, p).ok();
  if (!held || !kv_.append(load.seq, n * int32_t(page_size))) {
    kv_.release(load.seq);
    return false;
  }
  std::span<const PageId> pages = kv_.pages(load.seq, 0);
  load.pages.assign(pages.begin() + hit.num_pages, pages.end());
  for (int32_t i = 0; i < n; ++i) {
    const KVDiskPageKey key{load.digests[size_t(i)],
                            i == 0 ? hit.cursor.digest : load.digests[size_t(i) - 1],
                            cache_namespace, 0, std::nullopt};
    load.tickets.push_back(store_.read(
        key, std::span<const TokenId>(load.tokens).subspan(size_t(i) * page_size, page_size),
        memory_.page(load.pages[size_t(i)])));
  }
  load.state.assign(size_t(n), 0);
  load.pending = n;
  loads_.push_back(std::move(load));
  ++stats_.loads;
  return true;
}

bool PrefixDiskTier::loading_for(SeqId waiter) const {
  return std::any_of(loads_.begin(), loads_.end(),
                     [&](const Load& l) { return l.waiter == waiter; });
}

int32_t PrefixDiskTier::complete_loads() {
  if (loads_.empty()) return 0;
  completed_.clear();
  store_.take_completed(completed_);
  for (const auto& [ticket, ok] : completed_) {
    for (Load& load : loads_) {
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
  kv_.release(load.seq);
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
