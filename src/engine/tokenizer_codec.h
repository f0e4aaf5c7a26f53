// The engine's TextCodec over a model's Tokenizer: prompts are encoded with the request's
// add_special / parse_special, generated tokens decoded with StreamingDecoder (control tokens
// give no text).
#pragma once

#include <memory>

#include "engine/text_codec.h"
#include "tokenizer/tokenizer.h"

namespace drift {

std::shared_ptr<const TextCodec> make_tokenizer_codec(Tokenizer tokenizer);

}  // namespace drift
