// The logits processors that run before penalties: the grammar's allowed-token mask (constrained
// decoding) and a request's logit_bias.
#pragma once

#include <cstdint>
#include <span>

#include "util/sampling_params.h"

namespace drift {

// Sets to -inf the logit of every token `mask` does not allow (bit t % 32 of word t / 32 clear).
// logits: [n_vocab]; mask: [token_mask_words(n_vocab)]. Grammars allow either most tokens
// (inside a string) or few (between keys), so whole words are skipped or filled at once and only
// mixed words go bit by bit.
void apply_token_mask(std::span<float> logits, std::span<const uint32_t> mask);
// The same, one token at a time: the reference the tests compare apply_token_mask against.
void apply_token_mask_reference(std::span<float> logits, std::span<const uint32_t> mask);

// Adds each entry's bias to its token's logit; kBanBias sets it to -inf. Ids outside `logits`
// are skipped (the engine refuses them before they get here).
void apply_logit_bias(std::span<float> logits, std::span<const LogitBias> bias);

}  // namespace drift
