#include "engine/engine_snapshot.h"

#include <algorithm>

namespace drift {

void StepHistory::copy_to(std::vector<StepRecord>& out) const {
  out.clear();
  const uint64_t count = std::min<uint64_t>(next_, kSteps);
  for (uint64_t i = next_ - count; i < next_; ++i) out.push_back(ring_[i % kSteps]);
}

namespace {

PageMark page_mark(const KVCacheManager& kv, PageId page) {
  switch (kv.page_state(page)) {
    case PageState::kFree:
      return PageMark::kFree;
    case PageState::kCached:
      return PageMark::kCached;
    case PageState::kUsed:
      break;
  }
  return kv.refcount(page) > 1 ? PageMark::kShared : PageMark::kUsed;
}

}  // namespace

void fill_engine_snapshot(const EngineScheduler& scheduler, const KVCacheManager& kv,
                          const StepHistory& history, uint64_t steps, EngineSnapshot& out) {
  out.steps = steps;
  out.sequences.clear();
  scheduler.for_each_sequence([&](const SequenceState& seq) {
    SequenceView view;
    view.id = seq.id;
    view.phase = seq.phase;
    view.num_preemptions = seq.num_preemptions;
    view.prompt_tokens = seq.prompt_len;
    view.prefilled_tokens = std::min(seq.num_computed_tokens, seq.prompt_len);
    view.generated_tokens = seq.generated_len();
    view.max_new_tokens = seq.max_new_tokens;
    view.pages = int32_t(kv.pages(seq.id).size());
    out.sequences.push_back(view);
  });
  history.copy_to(out.recent_steps);
  const int32_t pages = kv.num_pages();
  out.page_map.resize(size_t(pages));
  for (PageId page = 0; page < PageId(pages); ++page)
    out.page_map[size_t(page)] = char(page_mark(kv, page));
}

}  // namespace drift
