// The one place where the scheduling policies differ: the rank by which waiting requests are
// admitted. The rank is a virtual arrival step (see SchedulerConfig's aging): since every waiting
// request ages at the same rate, comparing ranks fixed at arrival is the same as comparing aged
// scores at any later step, so the waiting queue stays sorted without re-ranking.
#pragma once

#include <memory>

#include "scheduler/scheduler_config.h"
#include "scheduler/sequence_state.h"

namespace drift {

class WaitingOrder {
 public:
  virtual ~WaitingOrder() = default;
  // Lower is admitted first; ties go to the earlier arrival. Reads the sequence's arrival_step,
  // prompt_len and priority.
  virtual double rank(const SequenceState& seq) const = 0;
};

std::unique_ptr<WaitingOrder> make_waiting_order(const SchedulerConfig& config);

// Whether `a` is admitted before `b`.
inline bool waits_before(const SequenceState& a, const SequenceState& b) {
  if (a.waiting_rank != b.waiting_rank) return a.waiting_rank < b.waiting_rank;
  return a.arrival_order < b.arrival_order;
}

}  // namespace drift
