// The engine's TextCodec over a model's Tokenizer and its chat prompt builder: text prompts are
// encoded with the request's add_special / parse_special, conversations through tokenize_chat
// (message text never becomes control tokens), generated tokens decoded with StreamingDecoder
// (control tokens give no text).
#pragma once

#include <memory>

#include "engine/text_codec.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"

namespace drift {

std::shared_ptr<const TextCodec> make_tokenizer_codec(Tokenizer tokenizer, ChatPromptBuilder chat);

}  // namespace drift
