#include "scheduler/capacity_scheduler.h"

#include <algorithm>
#include <cassert>

namespace drift {

KVUsageEstimate estimate_kv_usage(const KVLayout& layout, const KvCompressConfig& compress,
                                  int32_t max_step_tokens, int64_t prompt_len,
                                  int64_t max_new_tokens, double kv_keep, int64_t keep_from) {
  auto usage = [&](int64_t tokens, std::optional<int64_t> step) {
    KVUsageEstimate e;
    e.num_tokens = std::max<int64_t>(0, tokens);
    e.num_pages = layout.pages_to_hold(e.num_tokens, step);
    e.num_bytes = uint64_t(e.num_pages) * layout.bytes_per_page();
    return e;
  };
  const int64_t length = std::max<int64_t>(0, prompt_len) + std::max<int64_t>(0, max_new_tokens);
  if (!(kv_keep < 1.0))
    return usage(length,
                 max_step_tokens > 0 ? std::optional<int64_t>(max_step_tokens) : std::nullopt);
  // A compressed sequence's slots stop being positions: no group frees by window. Before a step
  // it holds less than its target + a page (a larger excess was compressed after the step that
  // made it); targets grow with the length, and a sequence no longer than min_tokens is not
  // compressed. A step then adds at most max_step_tokens.
  KvCompressConfig config = compress;
  config.keep = kv_keep;
  const int64_t held =
      std::max<int64_t>(config.min_tokens,
                        kv_keep_target(config, length, keep_from) + layout.page_size - 1) +
      max_step_tokens;
  return usage(std::min(held, length), std::nullopt);
}

int64_t CapacityScheduler::admissible_tokens(const SequenceState& seq, const CachedPrefix& prefix,
                                             int64_t held_back) const {
  const int64_t pending = int64_t(seq.total_len()) - int64_t(prefix.num_pages) * kv_.page_size();
  if (mode_ == AdmissionMode::kGuaranteed) {
    // The promised shared pages are part of the worst case; the ones that leave the cached list
    // cost pool. (A sliding page shared from a running sequence is no part of its promise: it
    // leaves the window, and a page the sequence pays for comes in its place.)
    const int64_t worst = estimate(seq.prompt_len, seq.max_new_tokens, seq.kv_keep,
                                   seq.kv_compressed() ? prefix.num_pages * kv_.page_size() : 0)
                              .num_pages;
    const int64_t needed = std::max<int64_t>(0, worst - prefix.num_promised) + prefix.num_from_pool;
    return needed <= kv_.num_available_pages() ? pending : 0;
  }
  const int64_t pages = kv_.num_available_pages() - prefix.num_from_pool - held_back;
  return std::max<int64_t>(0, pages) / kv_.layout().num_groups() * kv_.page_size();
}

int32_t CapacityScheduler::admit(const SequenceState& seq, const CachedPrefix& prefix) {
  Status opened = kv_.open(seq.id, int64_t(seq.prompt_len) + seq.max_new_tokens);
  assert(opened.ok());
  (void)opened;
  const auto groups = size_t(kv_.layout().num_groups());
  for (size_t i = 0; i < size_t(prefix.num_pages); ++i) {
    Status shared = kv_.share_pages(seq.id, prefix.pages.subspan(i * groups, groups));
    assert(shared.ok());
    (void)shared;
  }
  ++stats_.admitted;
  if (mode_ != AdmissionMode::kGuaranteed) return 0;
  const int32_t keep_from = seq.kv_compressed() ? prefix.num_pages * kv_.page_size() : 0;
  Status reserved =
      kv_.reserve(seq.id, estimate(seq.prompt_len, seq.max_new_tokens, seq.kv_keep, keep_from));
  assert(reserved.ok());
  (void)reserved;
  return kv_.reserved_pages(seq.id);
}

std::optional<size_t> CapacityScheduler::choose_victim(std::span<SequenceState* const> running,
                                                       const SequenceState& requester,
                                                       uint64_t step) const {
  for (size_t i = running.size(); i-- > 0;) {
    const SequenceState* s = running[i];
    if (s == &requester) return std::nullopt;  // the rest rank above the requester
    if (s->last_scheduled_step != step) return i;
  }
  return std::nullopt;
}

}  // namespace drift
