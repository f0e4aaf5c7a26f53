#include "scheduler/waiting_order.h"

namespace drift {
namespace {

// Arrival order.
class FcfsOrder final : public WaitingOrder {
 public:
  double rank(const SequenceState& seq) const override { return double(seq.arrival_step); }
};

// Shorter prompts first; a prompt of L tokens counts as arriving L / tokens_per_step steps late.
class SmallFirstOrder final : public WaitingOrder {
 public:
  explicit SmallFirstOrder(double tokens_per_step) : tokens_per_step_(tokens_per_step) {}
  double rank(const SequenceState& seq) const override {
    return double(seq.arrival_step) + double(seq.prompt_len) / tokens_per_step_;
  }

 private:
  double tokens_per_step_;
};

// Higher priority first; each priority level counts as arriving steps_per_level steps earlier.
class PriorityOrder final : public WaitingOrder {
 public:
  explicit PriorityOrder(double steps_per_level) : steps_per_level_(steps_per_level) {}
  double rank(const SequenceState& seq) const override {
    return double(seq.arrival_step) - double(seq.priority) * steps_per_level_;
  }

 private:
  double steps_per_level_;
};

}  // namespace

std::unique_ptr<WaitingOrder> make_waiting_order(const SchedulerConfig& config) {
  switch (config.policy) {
    case SchedulerPolicy::kFcfs:
      return std::make_unique<FcfsOrder>();
    case SchedulerPolicy::kSmallFirst:
      return std::make_unique<SmallFirstOrder>(config.small_first_tokens_per_step);
    case SchedulerPolicy::kPriority:
      return std::make_unique<PriorityOrder>(config.priority_steps_per_level);
  }
  return std::make_unique<FcfsOrder>();
}

}  // namespace drift
