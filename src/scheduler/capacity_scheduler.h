// Admission against KV capacity, and the choice of whom to preempt. It owns no page: it asks the
// KVCacheManager, which stays the single owner of page ids.
//
// Guaranteed mode: a sequence is admitted only if its worst case (prompt + max_new_tokens) can be
// reserved; its appends then always succeed. Optimistic mode: a sequence is admitted if its first
// chunk's pages are free now; later appends may find no page, and the scheduler then preempts
// a victim chosen here.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "kv/kv_cache_manager.h"
#include "scheduler/scheduler_config.h"
#include "scheduler/sequence_state.h"
#include "util/error.h"

namespace drift {

struct CapacityStats {
  uint64_t admitted = 0;   // admissions, re-admissions after preemption included
  uint64_t blocked = 0;    // steps in which the head of the waiting queue did not fit
  uint64_t preempted = 0;  // preemptions by recompute
};

// The leading full pages of a sequence found in the prefix cache at admission.
struct CachedPrefix {
  int32_t num_pages = 0;  // pages of page_size tokens covered
  // [num_pages][kv groups]: shared by the sequence instead of computed again (kNoPage: a sliding
  // group needs none there).
  std::span<const PageId> pages;
  int32_t num_from_pool = 0;  // of them, pages now cached (no holder): they leave the pool
  // Of them, the pages that count in the sequence's promise once shared (KVCacheManager): full
  // groups' pages, and sliding groups' from the pool (it pays for those).
  int32_t num_promised = 0;
  PrefixCursor cursor;  // the sequence's place in the cache after them
};

// Protection order of running sequences: higher priority first, then earlier arrival. The
// scheduler serves running sequences in this order and preempts from its end.
inline bool runs_before(const SequenceState& a, const SequenceState& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  return a.arrival_order < b.arrival_order;
}

// The most KV a sequence ever holds (CapacityScheduler::estimate), from the layout and the
// compression settings alone, so that the engine judges a request by the very formula the
// scheduler admits it by: prompt + max_new_tokens in full groups, at most the window plus one
// step (`max_step_tokens`, 0: unbounded) in sliding groups; or, compressed with kv_keep < 1, the
// largest target plus a page plus one step's tokens in every group, if that is less.
KVUsageEstimate estimate_kv_usage(const KVLayout& layout, const KvCompressConfig& compress,
                                  int32_t max_step_tokens, int64_t prompt_len,
                                  int64_t max_new_tokens, double kv_keep, int64_t keep_from = 0);

class CapacityScheduler {
 public:
  // `compress` and `max_step_tokens` (the most tokens one step may add to a sequence) bound what a
  // compressed sequence, or a sliding group, ever holds (estimate()).
  CapacityScheduler(AdmissionMode mode, KVCacheManager& kv, const KvCompressConfig& compress = {},
                    int32_t max_step_tokens = 0)
      : mode_(mode), kv_(kv), compress_(compress), max_step_tokens_(max_step_tokens) {}

  AdmissionMode mode() const { return mode_; }

  // The most KV a sequence ever holds: prompt + max_new_tokens in its full groups and at most the
  // window plus one step in its sliding groups (KVLayout::pages_to_hold); or, compressed with
  // kv_keep < 1 (each step's excess over its target compressed once it reaches a page; no page
  // freed by window), the largest target plus a page plus one step's tokens in every group, if
  // that is less than prompt + max_new_tokens.
  KVUsageEstimate estimate(int32_t prompt_len, int32_t max_new_tokens, double kv_keep,
                           int32_t keep_from = 0) const {
    return estimate_kv_usage(kv_.layout(), compress_, max_step_tokens_, prompt_len, max_new_tokens,
                             kv_keep, keep_from);
  }
  KVUsageEstimate estimate(const SequenceState& seq) const {
    return estimate(seq.prompt_len, seq.max_new_tokens, seq.kv_keep, seq.kv_keep_from);
  }

  // How many of the sequence's pending tokens (those after `prefix`) its KV could take now if it
  // were admitted sharing `prefix`: guaranteed mode, all of them if the pages of its worst case
  // beyond what the prefix gives its promise, plus the prefix's pages taken from the pool, can
  // be reserved, else 0; optimistic mode, what the available pages hold (a page in every group
  // per page of tokens) after the prefix's pages taken from the pool, less `held_back` pages
  // kept for running sequences. Cached pages count as available.
  int64_t admissible_tokens(const SequenceState& seq, const CachedPrefix& prefix,
                            int64_t held_back) const;

  // Opens the sequence's KV with the prefix's pages shared (refcounts up) and, in its sliding
  // groups, none below the window; then (guaranteed mode) reserves the rest of its worst case.
  // Returns the pages reserved. Precondition: admissible_tokens(seq, prefix, ...) > 0.
  int32_t admit(const SequenceState& seq, const CachedPrefix& prefix);
  void count_blocked() { ++stats_.blocked; }

  // The sequence to preempt so that `requester` can grow: among `running` (in protection
  // order), the last one that ranks below the requester and is not scheduled in `step`. nullopt
  // if there is none — the requester then waits; it never preempts itself.
  std::optional<size_t> choose_victim(std::span<SequenceState* const> running,
                                      const SequenceState& requester, uint64_t step) const;

  // Frees the sequence's pages and reservation (finish, cancel or preemption).
  std::optional<KVRelease> release(SeqId id) { return kv_.release(id); }
  std::optional<KVRelease> preempt(SeqId id) {
    ++stats_.preempted;
    return kv_.release(id);
  }

  const CapacityStats& stats() const { return stats_; }

 private:
  AdmissionMode mode_;
  KVCacheManager& kv_;
  KvCompressConfig compress_;
  int32_t max_step_tokens_;
  CapacityStats stats_;
};

}  // namespace drift
