#include "scheduler/spec_auto_gate.h"

#include <algorithm>
#include <bit>

namespace drift {

int SpecAutoGate::bucket_of(int32_t decoding) {
  const uint32_t n = uint32_t(std::max(decoding, 1));
  return std::min(int(std::bit_width(n - 1)), kBuckets - 1);  // 1 -> 0, 2 -> 1, 3-4 -> 2, ...
}

void SpecAutoGate::observe(int32_t decoding, int64_t committed, double seconds) {
  if (decoding <= 0 || !(seconds > 0)) return;
  Bucket& b = buckets_[bucket_of(decoding)];
  b.block_tokens_per_sequence += double(committed) / double(decoding);
  b.block_seconds += seconds;
  if (++b.block_steps == kBlockSteps) end_block(b);
}

void SpecAutoGate::end_block(Bucket& b) {
  // Rule: a block's rate updates its arm's by halves (recent blocks count most: the host's speed
  // and the text both drift); until both arms are measured they alternate; then the better arm
  // runs, and the other gets one block after every kExploreEvery of it.
  const int arm = b.arm_drafts ? 1 : 0;
  const double measured = b.block_tokens_per_sequence / b.block_seconds;
  b.rate[arm] = b.rate[arm] > 0 ? 0.5 * (b.rate[arm] + measured) : measured;
  b.block_steps = 0;
  b.block_tokens_per_sequence = 0;
  b.block_seconds = 0;
  const int other = 1 - arm;
  if (b.rate[other] == 0) {
    b.arm_drafts = other == 1;
    return;
  }
  // Ties go to no drafts: they cost the drafter's time and pages for nothing.
  const bool drafts_better = b.rate[1] > b.rate[0];
  if (b.arm_drafts != drafts_better) {
    b.arm_drafts = drafts_better;  // back from measuring the worse arm
    b.blocks_of_better_arm = 0;
    return;
  }
  if (++b.blocks_of_better_arm >= kExploreEvery) {
    b.arm_drafts = !drafts_better;
    b.blocks_of_better_arm = 0;
  }
}

}  // namespace drift
