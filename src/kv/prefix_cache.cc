#include "kv/prefix_cache.h"

#include <algorithm>
#include <bit>
#include <cassert>

namespace drift {

uint64_t default_prefix_hash(uint64_t parent_hash, std::span<const TokenId> tokens) {
  // splitmix64 finalizer over (state + token): well mixed, cheap; collisions are verified anyway.
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  uint64_t h = mix(parent_hash + 0x9E3779B97F4A7C15ull);
  for (TokenId t : tokens) h = mix(h + uint64_t(uint32_t(t)) + 0x9E3779B97F4A7C15ull);
  return mix(h ^ uint64_t(tokens.size()));
}

PrefixCache::PrefixCache(KVCacheManager& kv, PrefixHashFn hash, KVEventSink* events)
    : kv_(kv),
      hash_fn_(hash),
      events_(events),
      page_size_(kv.page_size()),
      registered_(size_t(kv.num_pages()), 0),
      hash_(size_t(kv.num_pages()), 0),
      namespace_(size_t(kv.num_pages()), 0),
      parent_(size_t(kv.num_pages()), kNoPage),
      parent_epoch_(size_t(kv.num_pages()), 0),
      epoch_(size_t(kv.num_pages()), 0),
      group_(size_t(kv.num_pages()), 0),
      digest_(size_t(kv.num_pages())),
      parent_digest_(size_t(kv.num_pages())),
      parent_hash_(size_t(kv.num_pages()), 0),
      tokens_(size_t(kv.num_pages()) * size_t(kv.page_size()), 0),
      chain_(size_t(kv.num_pages()) + 1),
      table_(std::bit_ceil(size_t(kv.num_pages()) * 2), kNoPage),
      mask_(table_.size() - 1) {
  kv_.set_eviction_listener(this);
}

PrefixCache::~PrefixCache() { kv_.set_eviction_listener(nullptr); }

PrefixCursor PrefixCache::root(uint64_t cache_namespace) const {
  PrefixCursor c;
  c.cache_namespace = cache_namespace;
  c.hash = hash_fn_(cache_namespace, {});
  c.digest = kv_digest_root(cache_namespace, digest_seed_);
  return c;
}

int64_t PrefixCache::find(uint64_t hash, const PrefixCursor& parent,
                          std::span<const TokenId> tokens, int32_t group) const {
  // Linear probing: every page with this hash sits between its home slot and the next empty one.
  for (size_t i = home(hash);; i = (i + 1) & mask_) {
    const PageId p = table_[i];
    if (p == kNoPage) return -1;
    const size_t u = size_t(p);
    if (hash_[u] == hash && group_[u] == group && namespace_[u] == parent.cache_namespace &&
        parent_[u] == parent.page && parent_epoch_[u] == parent.epoch &&
        std::ranges::equal(tokens_of(p), tokens))
      return int64_t(i);
  }
}

PrefixCursor PrefixCache::match(const PrefixCursor& from, std::span<const TokenId> tokens,
                                int32_t max_pages, std::vector<PageId>& pages) const {
  // Rule: follow the chain page by page while a verified page holds the next page_size tokens.
  PrefixCursor at = from;
  if (at.broken) return at;
  for (int32_t i = 0; i < max_pages; ++i) {
    const size_t begin = size_t(i) * size_t(page_size_);
    if (begin + size_t(page_size_) > tokens.size()) break;
    std::span<const TokenId> page_tokens = tokens.subspan(begin, size_t(page_size_));
    const uint64_t h = hash_fn_(at.hash, page_tokens);
    const int64_t slot = find(h, at, page_tokens);
    if (slot < 0) break;
    const PageId p = table_[size_t(slot)];
    pages.push_back(p);
    at.num_pages += 1;
    at.hash = h;
    at.page = p;
    at.epoch = epoch_[size_t(p)];
    at.digest = digest_[size_t(p)];
  }
  return at;
}

PrefixCursor PrefixCache::insert(const PrefixCursor& cursor, std::span<const TokenId> tokens,
                                 PageId page) {
  // Rule: one registered page per content; a duplicate moves the cursor onto the registered one.
  PrefixCursor next = cursor;
  next.num_pages += 1;
  if (cursor.broken || int64_t(tokens.size()) != page_size_ || page < 0 ||
      page >= kv_.num_pages()) {
    next.broken = true;
    return next;
  }
  const uint64_t h = hash_fn_(cursor.hash, tokens);
  next.hash = h;
  if (int64_t slot = find(h, cursor, tokens); slot >= 0) {
    next.page = table_[size_t(slot)];
    next.epoch = epoch_[size_t(next.page)];
    next.digest = digest_[size_t(next.page)];
    return next;
  }
  if (registered_[size_t(page)] || !kv_.mark_cacheable(page).ok()) {
    // Registered with another parent or content (a sequence's page list never does that), or
    // not in use: refuse rather than make a wrong chain.
    next.broken = true;
    return next;
  }
  // A second page under one hash (a collision, or a page whose parent was evicted and whose
  // content was computed again under a new parent page) is news to nobody outside.
  if (events_ && !hash_registered(h))
    events_->block_stored(
        h, cursor.num_pages > 0 ? std::optional<uint64_t>(cursor.hash) : std::nullopt, tokens);
  register_page(page, 0, h, cursor, tokens);
  next.page = page;
  next.epoch = epoch_[size_t(page)];
  next.digest = digest_[size_t(page)];
  return next;
}

PrefixCursor PrefixCache::insert(const PrefixCursor& cursor, std::span<const TokenId> tokens,
                                 std::span<const PageId> page_of_group) {
  // Rule: group 0 extends the chain; every other group's page hangs on the group-0 page the
  // chain then stands on, once per content as well.
  const PrefixCursor next =
      insert(cursor, tokens, page_of_group.empty() ? kNoPage : page_of_group[0]);
  if (next.broken) return next;
  for (size_t g = 1; g < page_of_group.size(); ++g) {
    const PageId page = page_of_group[g];
    if (page < 0 || page >= kv_.num_pages() || registered_[size_t(page)]) continue;
    if (find(next.hash, next, tokens, int32_t(g)) >= 0) continue;  // a copy is registered
    if (!kv_.mark_cacheable(page).ok()) continue;
    register_page(page, int32_t(g), next.hash, next, tokens);
  }
  return next;
}

void PrefixCache::register_page(PageId page, int32_t group, uint64_t hash,
                                const PrefixCursor& parent, std::span<const TokenId> tokens) {
  const size_t u = size_t(page);
  registered_[u] = 1;
  hash_[u] = hash;
  namespace_[u] = parent.cache_namespace;
  parent_[u] = parent.page;
  parent_epoch_[u] = parent.epoch;
  epoch_[u] += 1;
  group_[u] = group;
  // Group 0 extends the digest chain; another group's page shares its anchor's digests (the
  // anchor, just registered or found, is registered now).
  digest_[u] = group == 0 ? kv_digest_next(parent.digest, tokens) : parent.digest;
  parent_digest_[u] = group == 0 ? parent.digest : parent_digest_[size_t(parent.page)];
  parent_hash_[u] = parent.hash;
  std::ranges::copy(tokens, tokens_.begin() + std::ptrdiff_t(u * size_t(page_size_)));
  table_insert(page);
  ++num_registered_;
  ++stats_.pages_inserted;
}

PageId PrefixCache::group_page(const PrefixCursor& anchor, std::span<const TokenId> tokens,
                               int32_t group) const {
  if (anchor.page == kNoPage || int64_t(tokens.size()) != page_size_) return kNoPage;
  const int64_t slot = find(anchor.hash, anchor, tokens, group);
  return slot < 0 ? kNoPage : table_[size_t(slot)];
}

PageId PrefixCache::member_page(int32_t group, int32_t i, std::span<const TokenId> tokens) const {
  return group_page(chain_[size_t(i) + 1],
                    tokens.subspan(size_t(i) * size_t(page_size_), size_t(page_size_)), group);
}

PrefixHit PrefixCache::lookup(uint64_t cache_namespace, std::span<const TokenId> tokens,
                              int32_t max_pages, std::vector<PageId>& pages) const {
  // Rule: group 0's verified chain from the left; then the longest part of it every full group
  // covers from the left; then, from the right, the longest part whose every sliding group
  // holds the pages a query after it sees (a miss at index i rules out every length above i).
  const KVLayout& layout = kv_.layout();
  const int32_t groups = layout.num_groups();
  chain_[0] = root(cache_namespace);
  int32_t length = 0;
  const int32_t longest = std::min<int32_t>(max_pages, int32_t(chain_.size()) - 1);
  for (; length < longest; ++length) {
    const size_t begin = size_t(length) * size_t(page_size_);
    if (begin + size_t(page_size_) > tokens.size()) break;
    std::span<const TokenId> page_tokens = tokens.subspan(begin, size_t(page_size_));
    const PrefixCursor& at = chain_[size_t(length)];
    const uint64_t h = hash_fn_(at.hash, page_tokens);
    const int64_t slot = find(h, at, page_tokens);
    if (slot < 0) break;
    PrefixCursor& next = chain_[size_t(length) + 1];
    next = at;
    next.num_pages += 1;
    next.hash = h;
    next.page = table_[size_t(slot)];
    next.epoch = epoch_[size_t(next.page)];
    next.digest = digest_[size_t(next.page)];
  }
  for (int32_t g = 1; g < groups; ++g) {
    if (layout.group(g).sliding()) continue;
    for (int32_t i = 0; i < length; ++i) {
      if (member_page(g, i, tokens) != kNoPage) continue;
      length = i;
      break;
    }
  }
  auto first_needed = [&](int32_t g, int32_t n) {
    return int32_t(layout.first_page_seen(g, int64_t(n) * page_size_));
  };
  for (bool fits = false; length > 0 && !fits;) {
    fits = true;
    for (int32_t g = 1; g < groups && fits; ++g) {
      if (!layout.group(g).sliding()) continue;
      for (int32_t i = length; i-- > first_needed(g, length);) {
        if (member_page(g, i, tokens) != kNoPage) continue;
        length = i;
        fits = false;
        break;
      }
    }
  }
  for (int32_t i = 0; i < length; ++i) {
    for (int32_t g = 0; g < groups; ++g) {
      if (g == 0) {
        pages.push_back(chain_[size_t(i) + 1].page);
      } else if (layout.group(g).sliding() && i < first_needed(g, length)) {
        pages.push_back(kNoPage);
      } else {
        pages.push_back(member_page(g, i, tokens));
      }
    }
  }
  return PrefixHit{length, chain_[size_t(length)]};
}

void PrefixCache::record_query(int64_t queried, int64_t hit) {
  ++stats_.queries;
  stats_.queried_tokens += uint64_t(std::max<int64_t>(0, queried));
  stats_.hit_tokens += uint64_t(std::max<int64_t>(0, hit));
  if (hit > 0) {
    ++stats_.hits;
  } else {
    ++stats_.misses;
  }
}

int32_t PrefixCache::flush() {
  // Every registered page is cached (none in use): the flush leaves nothing, and vLLM's
  // reset_prefix_cache says so with one AllBlocksCleared.
  const bool clears_all = kv_.num_cached_pages() == num_registered_;
  quiet_removals_ = clears_all;
  flushing_ = true;
  const int32_t evicted = kv_.evict_all_cached();
  flushing_ = false;
  quiet_removals_ = false;
  if (events_ && clears_all) events_->all_blocks_cleared();
  return evicted;
}

EvictedPrefixPage PrefixCache::describe(PageId page) const {
  const size_t u = size_t(page);
  EvictedPrefixPage e;
  e.page = page;
  e.group = group_[u];
  e.cache_namespace = namespace_[u];
  e.hash = hash_[u];
  if (group_[u] == 0 && parent_[u] != kNoPage) e.parent_hash = parent_hash_[u];
  e.digest = digest_[u];
  e.parent_digest = parent_digest_[u];
  e.tokens = tokens_of(page);
  return e;
}

void PrefixCache::on_page_evicted(PageId page) {
  if (page < 0 || page >= kv_.num_pages() || !registered_[size_t(page)]) return;
  // Before anything is forgotten: the page's bytes are intact until the manager hands it out.
  if (spill_ && !flushing_) spill_->on_prefix_page_evicted(describe(page));
  table_remove(page);
  registered_[size_t(page)] = 0;
  --num_registered_;
  ++stats_.evictions;
  stats_.evicted_bytes += kv_.layout().bytes_per_page();
  const uint64_t h = hash_[size_t(page)];
  if (events_ && !quiet_removals_ && group_[size_t(page)] == 0 && !hash_registered(h))
    events_->block_removed(h);
}

bool PrefixCache::hash_registered(uint64_t hash) const {
  // Linear probing keeps every page of a hash between its home slot and the next empty one.
  for (size_t i = home(hash);; i = (i + 1) & mask_) {
    const PageId p = table_[i];
    if (p == kNoPage) return false;
    if (hash_[size_t(p)] == hash && group_[size_t(p)] == 0) return true;
  }
}

void PrefixCache::table_insert(PageId page) {
  size_t i = home(hash_[size_t(page)]);
  while (table_[i] != kNoPage) i = (i + 1) & mask_;
  table_[i] = page;
}

void PrefixCache::table_remove(PageId page) {
  // Backward-shift deletion: entries after the hole that may not skip it move into it, so every
  // entry stays reachable from its home slot without tombstones.
  size_t i = home(hash_[size_t(page)]);
  while (table_[i] != page) {
    assert(table_[i] != kNoPage);
    i = (i + 1) & mask_;
  }
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask_;
    if (table_[j] == kNoPage) break;
    const size_t k = home(hash_[size_t(table_[j])]);
    const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    table_[i] = table_[j];
    i = j;
  }
  table_[i] = kNoPage;
}

Status PrefixCache::check_invariants() const {
  int32_t in_table = 0;
  for (size_t i = 0; i < table_.size(); ++i) {
    const PageId p = table_[i];
    if (p == kNoPage) continue;
    ++in_table;
    if (p < 0 || p >= kv_.num_pages() || !registered_[size_t(p)])
      return make_error("prefix cache: table slot {} holds unregistered page {}", i, p);
    for (size_t k = home(hash_[size_t(p)]); k != i; k = (k + 1) & mask_) {
      if (table_[k] == kNoPage)
        return make_error("prefix cache: page {} in slot {} is unreachable from its home", p, i);
    }
  }
  int32_t registered = 0;
  for (PageId p = 0; p < kv_.num_pages(); ++p) {
    const PageState state = kv_.page_state(p);
    if (registered_[size_t(p)]) {
      ++registered;
      if (state == PageState::kFree || !kv_.cacheable(p))
        return make_error("prefix cache: registered page {} is {} in the kv cache", p,
                          state == PageState::kFree ? "free" : "not cacheable");
    } else if (state == PageState::kCached) {
      return make_error("prefix cache: cached page {} is not registered", p);
    }
  }
  if (registered != num_registered_ || in_table != num_registered_)
    return make_error("prefix cache: {} registered pages, {} in the table, {} counted", registered,
                      in_table, num_registered_);
  return Status::Ok();
}

}  // namespace drift
