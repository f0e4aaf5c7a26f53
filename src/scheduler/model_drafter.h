// The draft model of speculative decoding (docs/design-notes.md "Speculative decoding", part 4):
// a second, smaller model with the target's vocabulary proposes each asking sequence's next k
// tokens greedily, by k single-token forward passes batched across the sequences, run by an
// Executor of its own over a KV cache of its own (its geometry is not the target's).
//
// Per sequence it keeps the tokens whose K/V its cache holds: a prefix of the sequence's
// committed tokens, then the drafts it fed itself last step. At each ask the drafts the target
// accepted stay (they are now committed tokens), the rest are rolled back, and the committed
// tokens it lacks are fed first (a catch-up prefill, chunked: at most catch_up_tokens a step over
// all sequences; a sequence still catching up gets no draft that step). A sequence whose pages
// the pool cannot give gets no draft (the scheduler falls back to n-grams). Nothing is allocated
// after construction but the KV manager's per-sequence entry, when the sequence is admitted
// (start).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "scheduler/draft_proposer.h"
#include "scheduler/executor.h"
#include "scheduler/step_plan.h"
#include "util/sampling_params.h"

namespace drift {

struct ModelDrafterConfig {
  int32_t max_sequences = 64;     // sequences drafted for at once (the scheduler's max_num_seqs)
  int32_t max_context = 4096;     // longest sequence (max_model_len)
  int32_t max_draft_tokens = 8;   // longest draft (SpecConfig::max_draft_tokens)
  int32_t catch_up_tokens = 256;  // committed tokens fed per step over all sequences
  // The tokens one executor pass may carry: catch_up_tokens plus one per sequence.
  int32_t max_pass_tokens() const { return catch_up_tokens + max_sequences; }
};

struct ModelDrafterStats {
  uint64_t passes = 0;           // executor runs
  uint64_t catch_up_tokens = 0;  // committed tokens fed (prompts and accepted/sampled tokens)
  uint64_t draft_tokens = 0;     // tokens proposed
  uint64_t no_room = 0;          // asks refused for lack of KV pages or of a slot
};

class ModelDrafter final : public DraftProposer {
 public:
  // `executor` runs the draft model over `kv`'s pages (one KV group); both outlive the drafter.
  ModelDrafter(Executor& executor, KVCacheManager& kv, const ModelDrafterConfig& config);

  void propose(std::span<DraftAsk> asks) override;
  void start(SeqId seq) override { slot_for(seq, /*open=*/true); }
  void release(SeqId seq) override;

  const ModelDrafterStats& stats() const { return stats_; }
  // The committed tokens of `seq` the draft KV holds (0: none, or unknown).
  int32_t cached_tokens(SeqId seq) const;

 private:
  struct Slot {
    bool used = false;
    SeqId seq_id = 0;
    // Tokens whose K/V are in the cache, in order: `committed` of the sequence's, then drafts.
    std::vector<TokenId> tokens;  // reserved: max_context + max_draft_tokens
    int32_t committed = 0;
    int32_t ask = -1;  // index of its ask in this propose() call, -1: not asking
  };

  Slot* slot_for(SeqId seq, bool open);
  // Rolls the slot back to what the ask's tokens confirm and decides what it feeds: the tokens
  // it lacks (at most `budget`), with a sample if that completes the catch-up. false: no draft.
  bool prepare(Slot& slot, const DraftAsk& ask, int32_t& budget, int32_t& feed, bool& samples);
  // Appends an item of the last `num_tokens` of the slot's tokens to plan_, over `history` (the
  // tokens before them and after: it samples when they end it); false when the KV pool has no
  // room (nothing added).
  bool add_item(Slot& slot, int32_t num_tokens, std::span<const TokenId> history);
  Status run_pass();

  Executor& executor_;
  KVCacheManager& kv_;
  ModelDrafterConfig config_;
  std::vector<Slot> slots_;  // [max_sequences]
  StepPlan plan_;
  ExecutionResult result_;
  std::vector<Slot*> item_slots_;  // [max_sequences] the slot of each plan item
  SamplingParams greedy_;          // temperature 0: argmax
  ModelDrafterStats stats_;
  uint64_t step_ = 0;
};

}  // namespace drift
