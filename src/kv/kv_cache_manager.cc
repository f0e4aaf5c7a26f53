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
      lists_(num_pages, 2) {
  for (PageId p = 0; p < num_pages; ++p) lists_.push_back(kFreeList, p);
}

KVUsageEstimate KVCacheManager::estimate(int64_t prompt_len, int64_t max_new_tokens) const {
  KVUsageEstimate e;
  e.num_tokens = std::max<int64_t>(0, prompt_len) + std::max<int64_t>(0, max_new_tokens);
  e.num_pages = layout_.pages_for_tokens(e.num_tokens);
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
  s.pages.reserve(static_cast<size_t>(layout_.pages_for_tokens(max_tokens)));
  return Status::Ok();
}

Status KVCacheManager::reserve(SeqId seq, const KVUsageEstimate& estimate) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return make_error("kv cache: reserve for unknown sequence {}", seq);
  Sequence& s = it->second;
  int64_t have = int64_t(s.pages.size()) + s.reserved;
  int64_t more = std::max<int64_t>(0, estimate.num_pages - have);
  if (more > num_available_pages())
    return make_error("kv cache: sequence {} needs {} more pages, only {} of {} are available", seq,
                      more, num_available_pages(), num_pages_);
  s.reserved += static_cast<int32_t>(more);
  num_reserved_ += static_cast<int32_t>(more);
  return Status::Ok();
}

PageId KVCacheManager::take_page() {
  std::optional<PageId> page = lists_.pop_front(kFreeList);
  if (!page) {
    page = lists_.pop_front(kCachedList);
    assert(page);
    cacheable_[*page] = 0;
    if (eviction_listener_) eviction_listener_->on_page_evicted(*page);
  }
  refcount_[*page] = 1;
  return *page;
}

int64_t KVCacheManager::appendable_tokens(SeqId seq) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return 0;
  const Sequence& s = it->second;
  int64_t slack = int64_t(s.pages.size()) * page_size() - s.num_tokens;
  int64_t pages = int64_t(s.reserved) + num_available_pages();
  bool shared_partial_last = slack > 0 && refcount_[s.pages.back()] > 1;
  if (shared_partial_last) {
    // The first write needs a private copy of the last page before the slack is usable.
    return pages == 0 ? 0 : slack + (pages - 1) * page_size();
  }
  return slack + pages * page_size();
}

int64_t KVCacheManager::pool_pages_to_append(SeqId seq, int32_t num_tokens) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end() || num_tokens <= 0) return 0;
  const Sequence& s = it->second;
  int64_t slack = int64_t(s.pages.size()) * page_size() - s.num_tokens;
  bool copy_last = slack > 0 && refcount_[s.pages.back()] > 1;
  int64_t needed = layout_.pages_for_tokens(s.num_tokens + num_tokens) - int64_t(s.pages.size()) +
                   (copy_last ? 1 : 0);
  return std::max<int64_t>(0, needed - s.reserved);
}

std::optional<KVAppend> KVCacheManager::append(SeqId seq, int32_t num_tokens) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end() || num_tokens < 0) return std::nullopt;
  Sequence& s = it->second;
  KVAppend result;
  if (num_tokens == 0) return result;
  int64_t slack = int64_t(s.pages.size()) * page_size() - s.num_tokens;
  bool copy_last = slack > 0 && refcount_[s.pages.back()] > 1;
  int64_t new_pages = layout_.pages_for_tokens(s.num_tokens + num_tokens) - int64_t(s.pages.size());
  int64_t needed = new_pages + (copy_last ? 1 : 0);
  int64_t from_reservation = std::min<int64_t>(needed, s.reserved);
  if (needed - from_reservation > num_available_pages()) return std::nullopt;

  s.reserved -= static_cast<int32_t>(from_reservation);
  num_reserved_ -= static_cast<int32_t>(from_reservation);
  if (copy_last) {
    PageId shared = s.pages.back();
    PageId copy = take_page();
    --refcount_[shared];  // still > 0: another sequence holds it
    s.pages.back() = copy;
    result.copy_on_write = PageCopy{shared, copy};
  }
  for (int64_t i = 0; i < new_pages; ++i) s.pages.push_back(take_page());
  s.num_tokens += num_tokens;
  result.num_new_pages = static_cast<int32_t>(new_pages);
  return result;
}

Status KVCacheManager::fork(SeqId parent, SeqId child) {
  auto it = seqs_.find(parent);
  if (it == seqs_.end()) return make_error("kv cache: fork of unknown sequence {}", parent);
  if (seqs_.contains(child)) return make_error("kv cache: sequence {} is already open", child);
  // Copy the parent's state before inserting: the insertion may rehash and move it.
  Sequence copy;
  copy.pages.reserve(it->second.pages.capacity());
  copy.pages = it->second.pages;
  copy.num_tokens = it->second.num_tokens;
  for (PageId p : copy.pages) ++refcount_[p];
  seqs_.emplace(child, std::move(copy));
  return Status::Ok();
}

void KVCacheManager::drop_reference(PageId page, KVRelease& counts) {
  assert(refcount_[page] > 0);
  if (--refcount_[page] > 0) return;
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
  counts.references_dropped = static_cast<int32_t>(s.pages.size());
  for (auto p = s.pages.rbegin(); p != s.pages.rend(); ++p) drop_reference(*p, counts);
  counts.reservation_returned = s.reserved;
  num_reserved_ -= s.reserved;
  seqs_.erase(it);
  return counts;
}

bool KVCacheManager::writes_shared_page(SeqId seq, int64_t keep_from) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return false;
  const Sequence& s = it->second;
  for (size_t i = static_cast<size_t>(std::max<int64_t>(0, keep_from) / page_size());
       i < s.pages.size(); ++i)
    if (refcount_[s.pages[i]] > 1 || cacheable_[s.pages[i]]) return true;
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
  counts.references_dropped = static_cast<int32_t>(s.pages.size() - keep_pages);
  while (s.pages.size() > keep_pages) {
    drop_reference(s.pages.back(), counts);
    s.pages.pop_back();
  }
  s.num_tokens = num_tokens;
  if (keep_promise) {
    s.reserved += counts.references_dropped;
    num_reserved_ += counts.references_dropped;
  }
  return counts;
}

std::span<const PageId> KVCacheManager::pages(SeqId seq) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return {};
  return it->second.pages;
}

int64_t KVCacheManager::num_tokens(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : it->second.num_tokens;
}

int32_t KVCacheManager::reserved_pages(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : it->second.reserved;
}

Status KVCacheManager::mark_cacheable(PageId page) {
  if (page < 0 || page >= num_pages_) return make_error("kv cache: no page {}", page);
  if (page_state(page) != PageState::kUsed)
    return make_error("kv cache: page {} is not in use and cannot be marked cacheable", page);
  cacheable_[page] = 1;
  return Status::Ok();
}

Status KVCacheManager::share_page(SeqId seq, PageId page) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return make_error("kv cache: share_page for unknown sequence {}", seq);
  if (page < 0 || page >= num_pages_) return make_error("kv cache: no page {}", page);
  Sequence& s = it->second;
  if (s.num_tokens % page_size() != 0)
    return make_error("kv cache: sequence {} has {} tokens, not at a page boundary", seq,
                      s.num_tokens);
  PageState state = page_state(page);
  if (state == PageState::kFree) return make_error("kv cache: page {} is free, not shared", page);
  if (state == PageState::kCached) {
    if (num_available_pages() < 1)
      return make_error("kv cache: cached page {} cannot be taken: every spare page is reserved",
                        page);
    lists_.remove(page);
  }
  ++refcount_[page];
  s.pages.push_back(page);
  s.num_tokens += page_size();
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
  int64_t reserved = 0;
  for (const auto& [id, s] : seqs_) {
    if (int64_t(s.pages.size()) != layout_.pages_for_tokens(s.num_tokens))
      return make_error("kv cache: sequence {} holds {} pages for {} tokens", id, s.pages.size(),
                        s.num_tokens);
    if (s.reserved < 0) return make_error("kv cache: sequence {} reserved {}", id, s.reserved);
    reserved += s.reserved;
    for (PageId p : s.pages) {
      if (p < 0 || p >= num_pages_) return make_error("kv cache: sequence {} holds page {}", id, p);
      ++references[p];
    }
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
