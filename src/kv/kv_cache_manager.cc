#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <cassert>

namespace drift {

Expected<KVCacheManager> KVCacheManager::create(const KVLayout& layout, int32_t num_pages) {
  DRIFT_RETURN_IF_ERROR(layout.validate());
  if (num_pages < 1) return make_error("kv cache: num_pages must be >= 1, got {}", num_pages);
  return KVCacheManager(layout, num_pages);
}

KVCacheManager::KVCacheManager(const KVLayout& layout, int32_t num_pages)
    : layout_(layout),
      num_pages_(num_pages),
      refcount_(num_pages, 0),
      cacheable_(num_pages, 0),
      payer_(num_pages, kNoPayer),
      lists_(num_pages, 2),
      copy_scratch_(size_t(layout.num_groups()), kNoPage),
      row_scratch_(size_t(layout.num_groups()), kNoPage),
      held_scratch_(size_t(layout.num_groups()), 0) {
  for (PageId p = 0; p < num_pages; ++p) lists_.push_back(kFreeList, p);
}

KVUsageEstimate KVCacheManager::estimate(int64_t prompt_len, int64_t max_new_tokens,
                                         std::optional<int64_t> max_step_tokens) const {
  KVUsageEstimate e;
  e.num_tokens = std::max<int64_t>(0, prompt_len) + std::max<int64_t>(0, max_new_tokens);
  e.num_pages = layout_.pages_to_hold(e.num_tokens, max_step_tokens);
  e.num_bytes = uint64_t(e.num_pages) * layout_.bytes_per_page();
  return e;
}

PageState KVCacheManager::page_state(PageId page) const {
  std::optional<int32_t> list = lists_.list_of(page);
  if (!list) return PageState::kUsed;
  return *list == kFreeList ? PageState::kFree : PageState::kCached;
}

Status KVCacheManager::open(SeqId seq, int64_t max_tokens) {
  if (seqs_.contains(seq)) return make_error("kv cache: sequence {} is already open", seq);
  if (max_tokens < 0) return make_error("kv cache: max_tokens must be >= 0, got {}", max_tokens);
  Sequence& s = seqs_[seq];
  s.groups.resize(size_t(layout_.num_groups()));
  for (GroupPages& g : s.groups)
    g.pages.reserve(static_cast<size_t>(layout_.pages_for_tokens(max_tokens)));
  return Status::Ok();
}

int64_t KVCacheManager::promised(const Sequence& s) const {
  int64_t held_for_good = 0;
  for (int32_t g = 0; g < layout_.num_groups(); ++g)
    if (!layout_.group(g).sliding())
      held_for_good += int64_t(s.groups[size_t(g)].pages.size()) - s.groups[size_t(g)].first_live;
  return held_for_good + s.paid + s.reserved;
}

Status KVCacheManager::reserve(SeqId seq, const KVUsageEstimate& estimate) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return make_error("kv cache: reserve for unknown sequence {}", seq);
  Sequence& s = it->second;
  int64_t more = std::max<int64_t>(0, estimate.num_pages - promised(s));
  if (more > num_available_pages())
    return make_error("kv cache: sequence {} needs {} more pages, only {} of {} are available", seq,
                      more, num_available_pages(), num_pages_);
  s.reserved += static_cast<int32_t>(more);
  num_reserved_ += static_cast<int32_t>(more);
  s.promised = true;
  return Status::Ok();
}

PageId KVCacheManager::take_page(SeqId payer) {
  std::optional<PageId> page = lists_.pop_front(kFreeList);
  if (!page) {
    page = lists_.pop_front(kCachedList);
    assert(page);
    cacheable_[*page] = 0;
    if (eviction_listener_) eviction_listener_->on_page_evicted(*page);
  }
  refcount_[*page] = 1;
  payer_[*page] = payer;
  return *page;
}

int32_t KVCacheManager::shared_partial_pages(const Sequence& s) const {
  const int64_t slack = layout_.pages_for_tokens(s.num_tokens) * page_size() - s.num_tokens;
  if (slack == 0) return 0;
  int32_t shared = 0;
  for (const GroupPages& g : s.groups) shared += refcount_[g.pages.back()] > 1;
  return shared;
}

int64_t KVCacheManager::appendable_tokens(SeqId seq) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return 0;
  const Sequence& s = it->second;
  const int64_t slack = layout_.pages_for_tokens(s.num_tokens) * page_size() - s.num_tokens;
  // The first write needs a private copy of each shared partial last page before the slack is
  // usable; then every page_size tokens take a page in every group.
  const int64_t pages = int64_t(s.reserved) + num_available_pages() - shared_partial_pages(s);
  if (pages < 0) return 0;
  return slack + pages / layout_.num_groups() * page_size();
}

int64_t KVCacheManager::pool_pages_to_append(SeqId seq, int32_t num_tokens) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end() || num_tokens <= 0) return 0;
  const Sequence& s = it->second;
  const int64_t new_pages =
      layout_.pages_for_tokens(s.num_tokens + num_tokens) - layout_.pages_for_tokens(s.num_tokens);
  const int64_t needed = new_pages * layout_.num_groups() + shared_partial_pages(s);
  return std::max<int64_t>(0, needed - s.reserved);
}

std::optional<KVAppend> KVCacheManager::append(SeqId seq, int32_t num_tokens,
                                               std::vector<PageCopy>* copies) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end() || num_tokens < 0) return std::nullopt;
  Sequence& s = it->second;
  KVAppend result;
  if (num_tokens == 0) return result;
  const int64_t new_pages =
      layout_.pages_for_tokens(s.num_tokens + num_tokens) - layout_.pages_for_tokens(s.num_tokens);
  const int32_t cows = shared_partial_pages(s);
  const int64_t needed = new_pages * layout_.num_groups() + cows;
  int64_t from_reservation = std::min<int64_t>(needed, s.reserved);
  if (needed - from_reservation > num_available_pages()) return std::nullopt;

  s.reserved -= static_cast<int32_t>(from_reservation);
  num_reserved_ -= static_cast<int32_t>(from_reservation);
  // Every page is taken before a shared page's reference is dropped, which may pay the sequence
  // back from what is available: what this append takes must not count as available then.
  for (int32_t g = 0; g < layout_.num_groups(); ++g) {
    GroupPages& list = s.groups[size_t(g)];
    const bool copy = cows > 0 && refcount_[list.pages.back()] > 1;
    copy_scratch_[size_t(g)] = copy ? take_page(seq) : kNoPage;
    for (int64_t i = 0; i < new_pages; ++i) list.pages.push_back(take_page(seq));
    if (layout_.group(g).sliding()) s.paid += static_cast<int32_t>(new_pages) + (copy ? 1 : 0);
  }
  for (int32_t g = 0; g < layout_.num_groups() && cows > 0; ++g) {
    const PageId private_copy = copy_scratch_[size_t(g)];
    if (private_copy == kNoPage) continue;
    // Another sequence holds the partial page: the sequence writes into its private copy.
    GroupPages& list = s.groups[size_t(g)];
    const size_t index = list.pages.size() - 1 - size_t(new_pages);
    const PageId shared = list.pages[index];
    list.pages[index] = private_copy;
    if (layout_.group(g).sliding()) {
      KVRelease ignored;
      drop_sliding_page(seq, s, g, index, shared, ignored);
    } else {
      --refcount_[shared];
      if (payer_[shared] == seq) payer_[shared] = kNoPayer;  // full pages are paid by holding
    }
    const PageCopy page_copy{shared, private_copy};
    if (!result.copy_on_write) result.copy_on_write = page_copy;
    if (copies) copies->push_back(page_copy);
    ++result.num_copies;
  }
  s.num_tokens += num_tokens;
  result.num_new_pages = static_cast<int32_t>(new_pages);
  return result;
}

void KVCacheManager::drop_sliding_page(SeqId seq, Sequence& s, int32_t group, size_t index,
                                       PageId page, KVRelease& counts) {
  const bool paid_by_seq = payer_[page] == seq;
  drop_reference(page, counts);
  if (!paid_by_seq) return;
  --s.paid;
  if (refcount_[page] == 0) {
    // Back in the pool (free or cached): it pays for the sequence's next page.
    payer_[page] = kNoPayer;
    if (s.promised) {
      ++s.reserved;
      ++num_reserved_;
      ++counts.reservation_regained;
    }
    return;
  }
  // Another sequence holds it at the same place (pages are shared only so): it pays from now on,
  // from the reservation its promise kept for a page it held without paying.
  for (auto& [id, other] : seqs_) {
    if (id == seq || index >= other.groups[size_t(group)].pages.size() ||
        other.groups[size_t(group)].pages[index] != page)
      continue;
    payer_[page] = id;
    ++other.paid;
    if (!s.promised) return;
    if (other.reserved > 0) {
      --other.reserved;
      ++s.reserved;
      ++counts.reservation_regained;
    } else if (num_available_pages() > 0) {  // a holder without a promise (a fork)
      ++s.reserved;
      ++num_reserved_;
      ++counts.reservation_regained;
    }
    return;
  }
  payer_[page] = kNoPayer;
}

KVRelease KVCacheManager::free_outside_window(SeqId seq, int64_t next_position) {
  KVRelease counts;
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return counts;
  Sequence& s = it->second;
  for (int32_t g = 0; g < layout_.num_groups(); ++g) {
    if (!layout_.group(g).sliding()) continue;
    GroupPages& list = s.groups[size_t(g)];
    const auto dead = static_cast<int32_t>(
        std::min<int64_t>(layout_.first_page_seen(g, next_position), int64_t(list.pages.size())));
    for (; list.first_live < dead; ++list.first_live) {
      drop_sliding_page(seq, s, g, size_t(list.first_live), list.pages[size_t(list.first_live)],
                        counts);
      list.pages[size_t(list.first_live)] = kNoPage;
      ++counts.references_dropped;
    }
  }
  return counts;
}

Status KVCacheManager::fork(SeqId parent, SeqId child) {
  auto it = seqs_.find(parent);
  if (it == seqs_.end()) return make_error("kv cache: fork of unknown sequence {}", parent);
  if (seqs_.contains(child)) return make_error("kv cache: sequence {} is already open", child);
  // Copy the parent's state before inserting: the insertion may rehash and move it.
  Sequence copy;
  copy.groups.resize(it->second.groups.size());
  for (size_t g = 0; g < copy.groups.size(); ++g) {
    const GroupPages& from = it->second.groups[g];
    copy.groups[g].pages.reserve(from.pages.capacity());
    copy.groups[g].pages = from.pages;
    copy.groups[g].first_live = from.first_live;
    for (size_t i = size_t(from.first_live); i < from.pages.size(); ++i) ++refcount_[from.pages[i]];
  }
  copy.num_tokens = it->second.num_tokens;
  seqs_.emplace(child, std::move(copy));
  return Status::Ok();
}

void KVCacheManager::drop_reference(PageId page, KVRelease& counts) {
  assert(refcount_[page] > 0);
  if (--refcount_[page] > 0) return;
  payer_[page] = kNoPayer;
  if (cacheable_[page]) {
    lists_.push_back(kCachedList, page);
    ++counts.pages_cached;
  } else {
    lists_.push_back(kFreeList, page);
    ++counts.pages_freed;
  }
}

std::optional<KVRelease> KVCacheManager::release(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return std::nullopt;
  Sequence& s = it->second;
  KVRelease counts;
  const size_t length = size_t(layout_.pages_for_tokens(s.num_tokens));
  for (size_t i = length; i-- > 0;) {
    for (size_t g = s.groups.size(); g-- > 0;) {
      const GroupPages& list = s.groups[g];
      if (i < size_t(list.first_live)) continue;
      const PageId page = list.pages[i];
      ++counts.references_dropped;
      // A page it paid for that others still hold: no one pays for it any more (its holders'
      // promises never counted on this sequence).
      if (payer_[page] == seq) payer_[page] = kNoPayer;
      drop_reference(page, counts);
    }
  }
  counts.reservation_returned = s.reserved;
  num_reserved_ -= s.reserved;
  seqs_.erase(it);
  return counts;
}

bool KVCacheManager::writes_shared_page(SeqId seq, int64_t keep_from) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return false;
  for (const GroupPages& list : it->second.groups) {
    for (size_t i = static_cast<size_t>(
             std::max<int64_t>({0, keep_from / page_size(), int64_t(list.first_live)}));
         i < list.pages.size(); ++i)
      if (refcount_[list.pages[i]] > 1 || cacheable_[list.pages[i]]) return true;
  }
  return false;
}

Expected<KVRelease> KVCacheManager::compress(SeqId seq, int64_t keep_from, int64_t num_tokens,
                                             bool keep_promise) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return make_error("kv cache: compress of unknown sequence {}", seq);
  Sequence& s = it->second;
  if (keep_from < 0 || num_tokens < keep_from || num_tokens > s.num_tokens)
    return make_error("kv cache: sequence {} of {} tokens cannot keep {} from slot {}", seq,
                      s.num_tokens, num_tokens, keep_from);
  if (writes_shared_page(seq, keep_from))
    return make_error("kv cache: compressing sequence {} from slot {} would write a shared page",
                      seq, keep_from);
  KVRelease counts;
  const auto keep_pages = static_cast<size_t>(layout_.pages_for_tokens(num_tokens));
  int32_t promised_dropped = 0;  // pages its promise counted: full groups', sliding ones it paid
  for (size_t g = 0; g < s.groups.size(); ++g) {
    GroupPages& list = s.groups[g];
    while (list.pages.size() > keep_pages) {
      // Held by no one else (checked above): it returns to the free list.
      const PageId page = list.pages.back();
      if (!layout_.group(int32_t(g)).sliding()) {
        ++promised_dropped;
      } else if (payer_[page] == seq) {
        --s.paid;
        ++promised_dropped;
      }
      drop_reference(page, counts);
      list.pages.pop_back();
      ++counts.references_dropped;
    }
  }
  s.num_tokens = num_tokens;
  if (keep_promise) {
    s.reserved += promised_dropped;
    num_reserved_ += promised_dropped;
    counts.reservation_regained = promised_dropped;
  }
  return counts;
}

std::span<const PageId> KVCacheManager::pages(SeqId seq, int32_t group) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end() || group < 0 || group >= layout_.num_groups()) return {};
  return it->second.groups[size_t(group)].pages;
}

int64_t KVCacheManager::num_tokens(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : it->second.num_tokens;
}

int32_t KVCacheManager::reserved_pages(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : it->second.reserved;
}

int64_t KVCacheManager::held_pages(SeqId seq) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return 0;
  int64_t held = 0;
  for (const GroupPages& list : it->second.groups)
    held += int64_t(list.pages.size()) - list.first_live;
  return held;
}

int64_t KVCacheManager::promised_pages(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : promised(it->second);
}

std::optional<SeqId> KVCacheManager::payer(PageId page) const {
  if (page < 0 || page >= num_pages_ || payer_[page] == kNoPayer) return std::nullopt;
  return payer_[page];
}

Status KVCacheManager::mark_cacheable(PageId page) {
  if (page < 0 || page >= num_pages_) return make_error("kv cache: no page {}", page);
  if (page_state(page) != PageState::kUsed)
    return make_error("kv cache: page {} is not in use and cannot be marked cacheable", page);
  cacheable_[page] = 1;
  return Status::Ok();
}

Status KVCacheManager::share_pages(SeqId seq, std::span<const PageId> page_of_group) {
  if (int32_t(page_of_group.size()) != layout_.num_groups())
    return make_error("kv cache: {} pages shared at once, the cache has {} groups",
                      page_of_group.size(), layout_.num_groups());
  std::copy(page_of_group.begin(), page_of_group.end(), row_scratch_.begin());
  for (PageId p : page_of_group)
    if (p == kTakePage) return make_error("kv cache: share_pages takes no new page");
  return append_rows(seq, row_scratch_);
}

Status KVCacheManager::check_rows(const Sequence& s, SeqId seq, std::span<const PageId> rows,
                                  int64_t& from_pool) const {
  // Rule: a sliding group holds kNoPage only in front of every page it holds; a shared page is
  // in use or cached, and in one group of its row.
  const auto groups = size_t(layout_.num_groups());
  for (size_t g = 0; g < groups; ++g)  // 1: the group holds a page before this row
    held_scratch_[g] = size_t(s.groups[g].first_live) < s.groups[g].pages.size();
  from_pool = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const PageId page = rows[i];
    const size_t g = i % groups;
    if (page == kNoPage) {
      if (!layout_.group(int32_t(g)).sliding() || held_scratch_[g] != 0)
        return make_error(
            "kv cache: group {} of sequence {} must hold a page there (only a sliding group "
            "may hold none below its window)",
            g, seq);
      continue;
    }
    held_scratch_[g] = 1;
    if (page == kTakePage) {
      ++from_pool;
      continue;
    }
    if (page < 0 || page >= num_pages_) return make_error("kv cache: no page {}", page);
    for (size_t h = i - g; h < i; ++h)
      if (rows[h] == page) return make_error("kv cache: page {} shared in two groups", page);
    const PageState state = page_state(page);
    if (state == PageState::kFree) return make_error("kv cache: page {} is free, not shared", page);
    from_pool += state == PageState::kCached;
  }
  if (from_pool > num_available_pages())
    return make_error("kv cache: {} pages cannot be taken: every spare page is reserved",
                      from_pool);
  return Status::Ok();
}

Status KVCacheManager::append_rows(SeqId seq, std::span<PageId> rows) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return make_error("kv cache: pages shared with unknown sequence {}", seq);
  Sequence& s = it->second;
  const auto groups = size_t(layout_.num_groups());
  if (rows.size() % groups != 0)
    return make_error("kv cache: {} pages are no whole rows of {} groups", rows.size(), groups);
  if (s.num_tokens % page_size() != 0)
    return make_error("kv cache: sequence {} has {} tokens, not at a page boundary", seq,
                      s.num_tokens);
  int64_t from_pool = 0;
  DRIFT_RETURN_IF_ERROR(check_rows(s, seq, rows, from_pool));
  // Shared first: a cached page leaves the pool, paid by this sequence; then the new pages.
  for (size_t i = 0; i < rows.size(); ++i) {
    const PageId page = rows[i];
    if (page < 0) continue;
    if (page_state(page) == PageState::kCached) {
      lists_.remove(page);
      payer_[page] = seq;
      if (layout_.group(int32_t(i % groups)).sliding()) ++s.paid;
    }
    ++refcount_[page];
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] != kTakePage) continue;
    rows[i] = take_page(seq);
    if (layout_.group(int32_t(i % groups)).sliding()) ++s.paid;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    GroupPages& list = s.groups[i % groups];
    list.pages.push_back(rows[i]);
    if (rows[i] == kNoPage) ++list.first_live;
  }
  s.num_tokens += int64_t(rows.size() / groups) * page_size();
  return Status::Ok();
}

int32_t KVCacheManager::evict_all_cached() {
  int32_t moved = 0;
  while (std::optional<PageId> page = lists_.pop_front(kCachedList)) {
    cacheable_[*page] = 0;
    if (eviction_listener_) eviction_listener_->on_page_evicted(*page);
    lists_.push_back(kFreeList, *page);
    ++moved;
  }
  return moved;
}

Status KVCacheManager::check_invariants() const {
  if (!lists_.consistent()) return make_error("kv cache: free/cached lists are corrupt");
  int32_t free = 0, cached = 0, used = 0;
  std::vector<int32_t> references(num_pages_, 0);
  std::vector<int32_t> group_of(num_pages_, -1);
  int64_t reserved = 0;
  for (const auto& [id, s] : seqs_) {
    if (int32_t(s.groups.size()) != layout_.num_groups())
      return make_error("kv cache: sequence {} has {} groups", id, s.groups.size());
    int32_t paid = 0;
    for (int32_t g = 0; g < layout_.num_groups(); ++g) {
      const GroupPages& list = s.groups[size_t(g)];
      if (int64_t(list.pages.size()) != layout_.pages_for_tokens(s.num_tokens))
        return make_error("kv cache: sequence {} holds {} pages in group {} for {} tokens", id,
                          list.pages.size(), g, s.num_tokens);
      if (list.first_live < 0 || size_t(list.first_live) > list.pages.size() ||
          (list.first_live > 0 && !layout_.group(g).sliding()))
        return make_error("kv cache: sequence {} has no page before {} in full group {}", id,
                          list.first_live, g);
      for (size_t i = 0; i < list.pages.size(); ++i) {
        const PageId p = list.pages[i];
        if (i < size_t(list.first_live)) {
          if (p != kNoPage)
            return make_error("kv cache: sequence {} keeps page {} below its window", id, p);
          continue;
        }
        if (p < 0 || p >= num_pages_)
          return make_error("kv cache: sequence {} holds page {}", id, p);
        ++references[p];
        if (group_of[p] >= 0 && group_of[p] != g)
          return make_error("kv cache: page {} is in groups {} and {}", p, group_of[p], g);
        group_of[p] = g;
        if (layout_.group(g).sliding() && payer_[p] == id) ++paid;
      }
    }
    if (paid != s.paid)
      return make_error("kv cache: sequence {} pays for {} pages but counts {}", id, paid, s.paid);
    if (s.reserved < 0) return make_error("kv cache: sequence {} reserved {}", id, s.reserved);
    reserved += s.reserved;
  }
  for (PageId p = 0; p < num_pages_; ++p) {
    PageState state = page_state(p);
    free += state == PageState::kFree;
    cached += state == PageState::kCached;
    used += state == PageState::kUsed;
    if (refcount_[p] != references[p])
      return make_error("kv cache: page {} has refcount {} but {} holders", p, refcount_[p],
                        references[p]);
    if ((state == PageState::kUsed) != (refcount_[p] > 0))
      return make_error("kv cache: page {} is {} with refcount {}", p,
                        state == PageState::kUsed ? "used" : "unused", refcount_[p]);
    if (state == PageState::kFree && cacheable_[p])
      return make_error("kv cache: free page {} is marked cacheable", p);
    if (payer_[p] != kNoPayer) {
      auto holder = seqs_.find(payer_[p]);
      const bool holds = holder != seqs_.end() && group_of[p] >= 0 &&
                         std::ranges::find(holder->second.groups[size_t(group_of[p])].pages, p) !=
                             holder->second.groups[size_t(group_of[p])].pages.end();
      if (!holds)
        return make_error("kv cache: page {} is paid by sequence {}, which does not hold it", p,
                          payer_[p]);
    }
  }
  if (free + used + cached != num_pages_)
    return make_error("kv cache: free {} + used {} + cached {} != total {}", free, used, cached,
                      num_pages_);
  if (reserved != num_reserved_)
    return make_error("kv cache: reservations sum to {} but {} are counted", reserved,
                      num_reserved_);
  if (num_reserved_ > free + cached)
    return make_error("kv cache: {} pages reserved but only {} free or cached", num_reserved_,
                      free + cached);
  return Status::Ok();
}

}  // namespace drift
