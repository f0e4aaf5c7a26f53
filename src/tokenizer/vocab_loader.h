// Reads a tokenizer vocabulary from GGUF metadata (the tokenizer.ggml.* keys) the way llama.cpp's
// llama_vocab::load does, validating everything it reads: a missing or mistyped key, arrays of
// different lengths, a malformed merge, a duplicate token text or a special-token id outside the
// vocabulary is an error naming the key, never a crash.
#pragma once

#include "gguf/gguf_file.h"
#include "tokenizer/vocab.h"
#include "util/error.h"

namespace drift {

// Fills an empty `vocab`.
Status load_vocab(const GgufFile& file, Vocab& vocab);

}  // namespace drift
