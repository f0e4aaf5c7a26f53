// --spec auto's judge: whether a step's decodes may carry drafts, from what drafts have been
// measured to do here. Whether verifying k drafted tokens in one pass pays depends on the machine
// and the model (a step bound by reading the weights verifies them almost for free; a step bound
// by compute pays for each), on the text (how many drafts are accepted) and on the batch. No
// formula knows all three, so the gate measures: it runs the steps of each batch size in blocks
// with drafts allowed or not, keeps each arm's rate of committed tokens per sequence per second,
// runs the better arm, and re-measures the other one block in every kExploreEvery + 1 so that it
// follows a change of text or load. Greedy output does not depend on the arm (drafts never change
// a token), only speed does. A few counters per batch size; no allocation.
#pragma once

#include <array>
#include <cstdint>

namespace drift {

class SpecAutoGate {
 public:
  static constexpr int32_t kBlockSteps = 8;    // steps of one arm measured together
  static constexpr int32_t kExploreEvery = 8;  // blocks of the better arm per block of the other

  // Whether the next step in which `decoding` sequences decode may carry drafts.
  bool drafts_allowed(int32_t decoding) const { return buckets_[bucket_of(decoding)].arm_drafts; }

  // A step that ran with `decoding` sequences decoding and no prefill, under the arm
  // drafts_allowed gives for it now (nothing changes the arm but this call), committed
  // `committed` tokens in `seconds`.
  void observe(int32_t decoding, int64_t committed, double seconds);

  // Each arm's measured rate for a batch of `decoding` sequences: committed tokens per sequence
  // per second (0 until measured). For the engine page and the tests.
  double rate(int32_t decoding, bool drafts_arm) const {
    return buckets_[bucket_of(decoding)].rate[drafts_arm ? 1 : 0];
  }

 private:
  // Batches of 1, 2, 3-4, 5-8, ... sequences are judged apart: drafts shrink as the batch grows
  // (the step's draft budget), and their cost with it.
  static constexpr int kBuckets = 8;
  static int bucket_of(int32_t decoding);

  struct Bucket {
    // The arm the next steps run. Without drafts first: only steps of decodes alone are measured,
    // and under a stream of arrivals most steps also prefill, so a batch size may go long
    // unmeasured; it must then cost nothing (measuring drafts first kept them on there, and
    // SmolLM2 served 16 clients at 0.6x of --spec none).
    bool arm_drafts = false;
    int32_t block_steps = 0;
    double block_tokens_per_sequence = 0;
    double block_seconds = 0;
    std::array<double, 2> rate = {0, 0};  // [without drafts, with drafts]
    int32_t blocks_of_better_arm = 0;     // since the other arm was last measured
  };
  void end_block(Bucket& b);

  std::array<Bucket, kBuckets> buckets_{};
};

}  // namespace drift
