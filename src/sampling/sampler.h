// Turns one row of logits into a token: penalties, temperature, top-k, top-p, min-p, then a draw
// from the request's counter-based random stream (or argmax when temperature is 0).
//
// Order of operations (as vLLM applies them):
//   1. repetition penalty over prompt + generated tokens (logit / p if positive, * p if not),
//      presence and frequency penalties over generated tokens only;
//   2. temperature 0: argmax of the penalised logits (lowest id on ties), done;
//   3. logits / temperature, softmax;
//   4. top-k, then top-p (smallest set of most likely tokens whose mass reaches top_p), then
//      min-p (drop tokens below min_p * the most likely one's probability), renormalised;
//   5. inverse-CDF draw with u = stream_uniform(seed, index of the token being generated).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "util/sampling_params.h"

namespace drift {

// Working memory for sampling over a vocabulary of n_vocab tokens, allocated once so that
// sampling a token allocates nothing.
class SamplerScratch {
 public:
  explicit SamplerScratch(int64_t n_vocab);
  int64_t n_vocab() const { return static_cast<int64_t>(counts_.size()); }

 private:
  friend int32_t sample_token(std::span<float>, const SamplingParams&, std::span<const int32_t>,
                              int64_t, uint64_t, SamplerScratch&);
  std::vector<int32_t> counts_;      // [n_vocab] occurrences in the generated tokens
  std::vector<uint8_t> in_history_;  // [n_vocab] 1 if in prompt or generated tokens
  std::vector<int32_t> touched_;     // ids whose counts_/in_history_ entries are set
  std::vector<int32_t> candidates_;  // [n_vocab] token ids, ordered by probability
  std::vector<float> probs_;         // [n_vocab] probabilities by token id
};

// Samples the next token. `logits` ([n_vocab], modified in place by penalties and temperature);
// `history` = prompt tokens then generated tokens; `prompt_len` of them are the prompt;
// `seed` is the request's stream (params.seed resolved by the caller). The draw index is the
// number of tokens generated so far, history.size() - prompt_len.
int32_t sample_token(std::span<float> logits, const SamplingParams& params,
                     std::span<const int32_t> history, int64_t prompt_len, uint64_t seed,
                     SamplerScratch& scratch);

// Index of the largest value (the first one on ties).
int32_t argmax(std::span<const float> values);

}  // namespace drift
