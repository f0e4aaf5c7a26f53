// The disk tier's read side (prefix_disk_tier.h): which page rows after a request's RAM hit RAM
// and the disk hold together, how many of them a load can serve (every sliding window whole, room
// in the pool), and the load that reads them.
#include <algorithm>

#include "kv/prefix_disk_tier.h"

namespace drift {

void PrefixDiskTier::survey(uint64_t cache_namespace, std::span<const TokenId> tokens,
                            const PrefixHit& hit, int32_t max_pages) {
  // Rule: rows after the hit as long as every full group has its page. Group 0's page is in RAM
  // while the chain RAM holds goes on from the hit (past a page read from disk, RAM's later pages
  // hang on another parent); another group's page is in RAM only beside a group-0 page in RAM
  // (its anchor), else on disk under (row digest, group).
  const KVLayout& layout = kv_.layout();
  const int32_t groups = layout.num_groups();
  const auto page_size = size_t(kv_.page_size());
  RowSurvey& s = survey_;
  s.first = s.end = hit.num_pages;
  s.digests.assign(1, hit.cursor.digest);
  s.ram.clear();
  s.on_disk.clear();
  PrefixCursor at = hit.cursor;
  bool in_ram = true;
  for (int32_t i = hit.num_pages; i < max_pages; ++i) {
    const size_t begin = size_t(i) * page_size;
    if (begin + page_size > tokens.size()) break;
    std::span<const TokenId> page_tokens = tokens.subspan(begin, page_size);
    const KVDigest parent = s.digests.back();
    const KVDigest digest = kv_digest_next(parent, page_tokens);
    PageId ram0 = kNoPage;
    if (in_ram) {
      match_scratch_.clear();
      const PrefixCursor next = cache_.match(at, page_tokens, 1, match_scratch_);
      in_ram = next.num_pages > at.num_pages;
      if (in_ram) {
        ram0 = match_scratch_[0];
        at = next;
      }
    }
    bool whole = true;
    for (int32_t g = 0; g < groups; ++g) {
      const PageId ram =
          g == 0 ? ram0 : (ram0 == kNoPage ? kNoPage : cache_.group_page(at, page_tokens, g));
      const bool disk = ram == kNoPage && store_.contains(digest, parent, cache_namespace, g);
      whole = whole && (ram != kNoPage || disk || layout.group(g).sliding());
      s.ram.push_back(ram);
      s.on_disk.push_back(disk);
    }
    if (!whole) {
      s.ram.resize(s.ram.size() - size_t(groups));
      s.on_disk.resize(s.on_disk.size() - size_t(groups));
      break;
    }
    s.digests.push_back(digest);
    s.end = i + 1;
  }
}

bool PrefixDiskTier::available(int32_t i, int32_t g) const {
  const size_t at = size_t(i - survey_.first) * size_t(kv_.layout().num_groups()) + size_t(g);
  return survey_.ram[at] != kNoPage || survey_.on_disk[at] != 0;
}

bool PrefixDiskTier::needed(int32_t i, int32_t g, int32_t n) const {
  return i >= kv_.layout().first_page_seen(g, int64_t(n) * kv_.page_size());
}

int32_t PrefixDiskTier::servable(int32_t n) const {
  // Rule: as PrefixCache::lookup, from the right: a sliding group's page missing at row i rules
  // out every length above i. Rows before the survey are the hit's, which holds every page a
  // longer run needs there (a longer run's windows start no earlier).
  const KVLayout& layout = kv_.layout();
  for (bool fits = false; n > survey_.first && !fits;) {
    fits = true;
    for (int32_t g = 1; g < layout.num_groups() && fits; ++g) {
      if (!layout.group(g).sliding()) continue;
      for (int32_t i = n; i-- > survey_.first && needed(i, g, n);) {
        if (available(i, g)) continue;
        n = i;
        fits = false;
        break;
      }
    }
  }
  return n;
}

int64_t PrefixDiskTier::pool_pages(int32_t n, std::span<const PageId> hit_pages) const {
  const int32_t groups = kv_.layout().num_groups();
  int64_t pages = 0;
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t g = 0; g < groups; ++g) {
      if (!needed(i, g, n)) continue;
      const PageId ram = i < survey_.first
                             ? hit_pages[size_t(i) * size_t(groups) + size_t(g)]
                             : survey_.ram[size_t(i - survey_.first) * size_t(groups) + size_t(g)];
      pages += ram == kNoPage || kv_.page_state(ram) == PageState::kCached;
    }
  }
  return pages;
}

PrefixDiskTier::Fetch PrefixDiskTier::fetch(SeqId waiter, uint64_t cache_namespace,
                                            std::span<const TokenId> tokens, const PrefixHit& hit,
                                            std::span<const PageId> hit_pages, int32_t max_pages,
                                            int32_t swapped_tokens, LoadShape shape) {
  // Rule: the longest run of rows after the RAM hit that RAM and the disk hold together, every
  // sliding window whole, read into pages the pool can spare now (never a reserved one) — or,
  // for a whole load, nothing unless it all fits; and a swapped sequence's partial last row if
  // that run reaches it.
  const int32_t page_size = kv_.page_size();
  const int32_t groups = kv_.layout().num_groups();
  survey(cache_namespace, tokens, hit, max_pages);
  int32_t n = servable(survey_.end);
  std::optional<Tail> tail;
  if (swapped_tokens % page_size > 0 && n == swapped_tokens / page_size)
    tail = find_tail(cache_namespace, tokens, survey_.digests[size_t(n - survey_.first)],
                     swapped_tokens);
  offer_ = Offer{n - hit.num_pages, pool_pages(n, hit_pages) + (tail ? groups : 0)};
  if (n == hit.num_pages && !tail) return Fetch::kNoneOnDisk;
  const int64_t room = kv_.num_available_pages();
  // A swapped sequence reads all it wrote or waits: a shorter run is recomputing, which the swap
  // was chosen to avoid (it cannot run before the pool has room for its pages anyway).
  if ((swapped_tokens > 0 || shape == LoadShape::kWhole) && offer_.pool_pages > room)
    return Fetch::kNoRoom;
  // Dropping a row frees at most a page per group: never fewer rows than the excess needs, and
  // never fewer than the hit (its cached pages count against the room too, so the excess can
  // be larger than the rows after it).
  for (int64_t excess = pool_pages(n, hit_pages) - room; n > hit.num_pages && excess > 0;
       excess = pool_pages(n, hit_pages) - room) {
    n = servable(std::max(hit.num_pages, n - int32_t(std::max<int64_t>(1, excess / groups))));
    tail.reset();
  }
  const int64_t taken = pool_pages(n, hit_pages);
  if (tail && taken + groups > room) tail.reset();
  if (taken > room || (n == hit.num_pages && !tail)) return Fetch::kNoRoom;

  Load load;
  load.waiter = waiter;
  load.cursor = hit.cursor;
  if (!start_load(load, n, hit_pages, tokens, cache_namespace)) return Fetch::kNoRoom;
  if (tail && read_tail(*tail, survey_.digests[size_t(n - survey_.first)], cache_namespace))
    load.tail = std::move(tail);
  load.pending = int32_t(load.tickets.size()) + (load.tail ? load.tail->pending : 0);
  if (load.pending == 0) {  // RAM held every page after all: nothing to wait for
    kv_.release(load.seq);
    return Fetch::kNoneOnDisk;
  }
  loads_.push_back(std::move(load));
  ++stats_.loads;
  return Fetch::kReading;
}

bool PrefixDiskTier::start_load(Load& load, int32_t n, std::span<const PageId> hit_pages,
                                std::span<const TokenId> tokens, uint64_t cache_namespace) {
  // Rule: the load's sequence is shaped as a sequence resuming after n rows: every page a full
  // group has, a sliding group's from its window on (kNoPage below); what RAM has is held, the
  // rest is taken from the pool and read into.
  const int32_t groups = kv_.layout().num_groups();
  const auto page_size = size_t(kv_.page_size());
  const int32_t first = survey_.first;
  row_scratch_.assign(size_t(n) * size_t(groups), kNoPage);
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t g = 0; g < groups; ++g) {
      if (!needed(i, g, n)) continue;
      const size_t at = size_t(i) * size_t(groups) + size_t(g);
      const PageId ram =
          i < first ? hit_pages[at] : survey_.ram[size_t(i - first) * size_t(groups) + size_t(g)];
      row_scratch_[at] = ram == kNoPage ? kTakePage : ram;
    }
  }
  load.seq = next_sequence();
  if (!kv_.open(load.seq, int64_t(n) * int64_t(page_size)).ok()) return false;
  if (!kv_.append_rows(load.seq, row_scratch_).ok()) {
    kv_.release(load.seq);
    return false;
  }
  load.tokens.assign(tokens.begin() + std::ptrdiff_t(size_t(first) * page_size),
                     tokens.begin() + std::ptrdiff_t(size_t(n) * page_size));
  load.rows.assign(row_scratch_.begin() + std::ptrdiff_t(size_t(first) * size_t(groups)),
                   row_scratch_.end());
  load.reads.assign(load.rows.size(), PageRead::kNone);
  for (size_t at = 0; at < load.rows.size(); ++at) {
    if (load.rows[at] == kNoPage) continue;
    const size_t r = at / size_t(groups);
    const auto g = int32_t(at % size_t(groups));
    if (survey_.ram[at] != kNoPage) {
      load.reads[at] = PageRead::kHeld;
      continue;
    }
    const KVDiskPageKey key{
        survey_.digests[r + 1], survey_.digests[r], cache_namespace, 0, std::nullopt, false, g};
    load.reads[at] = PageRead::kReading;
    load.tickets.push_back(
        store_.read(key, std::span<const TokenId>(load.tokens).subspan(r * page_size, page_size),
                    memory_.page(load.rows[at])));
    load.ticket_pages.push_back(int32_t(at));
  }
  return true;
}

std::optional<PrefixDiskTier::Tail> PrefixDiskTier::find_tail(uint64_t cache_namespace,
                                                              std::span<const TokenId> tokens,
                                                              const KVDigest& parent,
                                                              int32_t swapped_tokens) const {
  // Rule: a tail is usable only whole: every group's partial page on disk.
  const int32_t page_size = kv_.page_size();
  Tail tail;
  tail.page_index = swapped_tokens / page_size;
  tail.tokens.assign(tokens.begin() + tail.page_index * page_size, tokens.begin() + swapped_tokens);
  tail.digest = kv_digest_next(parent, tail.tokens);
  for (int32_t g = 0; g < kv_.layout().num_groups(); ++g)
    if (!store_.contains(tail.digest, parent, cache_namespace, g)) return std::nullopt;
  return tail;
}

bool PrefixDiskTier::read_tail(Tail& tail, const KVDigest& parent, uint64_t cache_namespace) {
  // Its own sequence holds the row: the load's pages go to the prefix cache when it finishes,
  // the tail waits for its sequence's admission.
  tail.holder = next_sequence();
  if (!kv_.open(tail.holder, kv_.page_size()).ok()) return false;
  if (!kv_.append(tail.holder, kv_.page_size())) {
    kv_.release(tail.holder);
    return false;
  }
  for (int32_t g = 0; g < kv_.layout().num_groups(); ++g) {
    const KVDiskPageKey key{tail.digest, parent, cache_namespace, 0, std::nullopt, false, g};
    tail.tickets.push_back(
        store_.read(key, tail.tokens, memory_.page(kv_.pages(tail.holder, g)[0])));
  }
  tail.pending = int32_t(tail.tickets.size());
  return true;
}

SeqId PrefixDiskTier::next_sequence() {
  while (kv_.contains(next_seq_)) ++next_seq_;
  return next_seq_++;
}

}  // namespace drift
