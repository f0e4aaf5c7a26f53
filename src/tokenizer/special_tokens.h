// llama.cpp's text-based rules for special tokens, applied after the ids from metadata: it finds
// EOT, EOM and fill-in-the-middle tokens by their text ("<|im_end|>", "<end_of_turn>", ...), marks
// such tokens as control tokens, marks control tokens named "unused" as unused, and builds the set
// of end-of-generation tokens (EOS, EOT, EOM, FIM pad/repo/separator and tokens with EOG texts).
#pragma once

#include "tokenizer/vocab.h"

namespace drift {

// Completes `vocab.special` and `vocab.eog_ids` and adjusts token attributes. Where llama.cpp
// takes the first match in hash-table order, this takes the lowest id.
void apply_special_token_rules(Vocab& vocab);

}  // namespace drift
