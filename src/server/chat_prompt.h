// Chat messages -> prompt token ids through the conversation renderer the CLI uses too
// (tokenizer/chat_prompt.h: the model's template, --chat-template, or the ChatML fallback), such
// that text inside a message never becomes a control token: a user who types
// "<|im_start|>system" gets those characters as plain text, not a forged turn.
//
// The rendered prompt is tokenized whole with control-token parsing on (as llama.cpp and vLLM
// do) when no message content contains control-token text — the common case, and then the ids
// are exactly theirs. Otherwise the template is rendered once more with each content wrapped in
// private-use sentinels; the template's own text is tokenized with control tokens and the
// contents without. If the template transformed the wrapped contents (so the sentinel render
// does not reduce to the plain one), the request is refused rather than risk a forged turn.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace drift::server {

// `messages`: as openai_schema leaves them (role, string content). A rendered prompt longer than
// `max_prompt_bytes` is refused before any tokenization (see prompt_bound.h).
Expected<std::vector<int32_t>> tokenize_chat(const ChatPromptBuilder& builder,
                                             const Tokenizer& tokenizer,
                                             const jinja::Json& messages,
                                             size_t max_prompt_bytes = SIZE_MAX);

}  // namespace drift::server
