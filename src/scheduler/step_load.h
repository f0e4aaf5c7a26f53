// What the cost of the next step depends on, as the scheduler sees it before composing it: the
// engine turns this into a prefill token budget with its step cost model (the scheduler itself
// never reads a clock).
#pragma once

#include <cstdint>

namespace drift {

struct StepLoad {
  // Sequences that decode one token in the next step, and the positions those tokens attend
  // over (the sum of their lengths).
  int32_t decoding = 0;
  int64_t decode_context = 0;
  // The furthest position a running prefill resumes from: a chunk of n tokens from there attends
  // over about n * (start + n / 2) positions.
  int32_t prefill_start = 0;
  // Prompt tokens not computed yet, of running prefills and of waiting requests: the prefill
  // work ahead of a request submitted now.
  int64_t pending_prefill_tokens = 0;
  int32_t waiting = 0;
};

}  // namespace drift
