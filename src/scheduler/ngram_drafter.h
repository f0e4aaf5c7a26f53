// Draftless drafting for speculative decoding: drafts from the sequence's own tokens (prompt
// lookup / suffix matching). It allocates nothing: it scans the sequence's tokens in place, a
// bounded window back. How long each draft may be is AdaptiveDraftLength's call.
//
// A draft is only a guess: the executor verifies it against the model at every position, so a
// wrong draft costs the extra tokens' compute in one step and never changes the output
// (docs/design-notes.md "Speculative decoding").
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "scheduler/sequence_state.h"

namespace drift {

struct NgramDraftConfig {
  // The suffix of the sequence that must have occurred before: at least min_ngram tokens (a single
  // token repeats too often to predict what follows), preferring longer matches up to max_ngram.
  int32_t min_ngram = 2;
  int32_t max_ngram = 5;
  // How far back the match is searched, in tokens: bounds a step's work to O(lookback) per
  // sequence, whatever the context length.
  int32_t lookback = 4096;
};

// Writes into `out` (at most out.size() tokens) the tokens that followed the most recent earlier
// occurrence of the longest suffix of `tokens` (min_ngram to max_ngram long) found within the
// lookback window, and returns how many (0: no match, or `out` is empty).
int32_t propose_ngram_draft(std::span<const TokenId> tokens, const NgramDraftConfig& config,
                            std::span<TokenId> out);

}  // namespace drift
