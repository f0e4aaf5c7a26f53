// Speculative decoding's draft model, as the scheduler sees it: something that proposes the next
// tokens of several decoding sequences at once from their committed tokens, and forgets a
// sequence when it ends or is preempted. The scheduler never sees what runs behind it
// (scheduler/model_drafter.h runs a second model through an Executor of its own).
#pragma once

#include <cstdint>
#include <span>

#include "kv/kv_types.h"
#include "scheduler/sequence_state.h"  // TokenId

namespace drift {

// One sequence's request for a draft in a step.
struct DraftAsk {
  SeqId seq_id = 0;
  // Its prompt and generated tokens so far; the draft continues them. Valid during propose().
  std::span<const TokenId> tokens;
  // Where the draft goes: at most out.size() tokens (>= 1).
  std::span<TokenId> out;
  // Set by propose(): how many tokens of `out` are the draft (0: none this step).
  int32_t proposed = 0;
};

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  // Fills each ask's draft, all asks in one batch. A sequence it cannot draft for this step
  // (memory full, its tokens still being caught up) gets 0 tokens, never an error.
  virtual void propose(std::span<DraftAsk> asks) = 0;
  // The sequence was admitted (again, after a preemption): what drafting for it needs is set up
  // now, with the sequence's own admission, so that drafting allocates nothing.
  virtual void start(SeqId seq) = 0;
  // The sequence ended or was preempted: whatever was kept for it is freed.
  virtual void release(SeqId seq) = 0;
};

}  // namespace drift
