// Turns one row of logits into a token: penalties, then top-k, top-p, min-p and temperature in
// the order params.order gives, then a draw from the request's counter-based random stream (or
// argmax when temperature is 0).
//
// Order of operations:
//   0. the grammar's allowed-token mask (disallowed tokens to -inf), then logit_bias;
//   1. penalties, over the last penalty_last_n tokens of the history (all of it when -1): the
//      repetition penalty over prompt and generated tokens (logit / p if positive, * p if not),
//      presence and frequency penalties over generated tokens only (OpenAI's and vLLM's rule);
//   2. temperature 0: argmax of the penalised logits (lowest id on ties), done;
//   3. the four filters, in params.order (default llama.cpp's: top-k, top-p, min-p,
//      temperature), each on the candidates the previous ones kept, with the probabilities they
//      give (softmax of logit / temperature if the temperature stage came before, else of the
//      logit, renormalised over the kept candidates):
//        top-k: the k most likely;
//        top-p: the smallest most-likely-first set whose mass reaches top_p (the crossing token
//               included);
//        min-p: those with probability >= min_p * the most likely one's;
//        temperature: divides the logits from here on;
//   4. inverse-CDF draw over the kept candidates, in the order the filters left them (most
//      likely first as far as one sorted them, by id when none ran), with
//      u = stream_uniform(seed, index of the token being generated).
// With the default order a temperature changes only how the kept tokens share the mass, not
// which are kept; a model's general.sampling.sequence may put temperature first (as vLLM does).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "util/cpu_features.h"
#include "util/sampling_params.h"

namespace drift {

// Working memory for sampling over a vocabulary of n_vocab tokens, allocated once so that
// sampling a token allocates nothing.
class SamplerScratch {
 public:
  // `isa`: the kernels greedy decoding uses (kernels/argmax.h).
  SamplerScratch(int64_t n_vocab, Isa isa);
  int64_t n_vocab() const { return static_cast<int64_t>(counts_.size()); }

 private:
  friend int32_t sample_token(std::span<float>, const SamplingParams&, std::span<const int32_t>,
                              int64_t, uint64_t, SamplerScratch&, std::span<const uint32_t>);
  std::vector<int32_t> counts_;      // [n_vocab] occurrences in the generated tokens
  std::vector<uint8_t> in_history_;  // [n_vocab] 1 if in prompt or generated tokens
  std::vector<int32_t> touched_;     // ids whose counts_/in_history_ entries are set
  std::vector<int32_t> candidates_;  // [n_vocab] token ids, most likely first as far as needed
  Isa isa_;
};

// Samples the next token. `logits` ([n_vocab], modified in place by penalties and temperature);
// `history` = prompt tokens then generated tokens; `prompt_len` of them are the prompt;
// `seed` is the request's stream (params.seed resolved by the caller). The draw index is the
// number of tokens generated so far, history.size() - prompt_len. `allowed`: the grammar's mask
// ([token_mask_words(n_vocab)], util/token_constraint.h), empty for an unconstrained sequence.
int32_t sample_token(std::span<float> logits, const SamplingParams& params,
                     std::span<const int32_t> history, int64_t prompt_len, uint64_t seed,
                     SamplerScratch& scratch, std::span<const uint32_t> allowed = {});

}  // namespace drift
