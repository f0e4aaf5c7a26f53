// Byte-level BPE pre-tokenizers, chosen by the GGUF key tokenizer.ggml.pre as llama.cpp chooses
// them: the word splitters to apply and the few tokenizer defaults that come with the name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/word_splitters.h"
#include "util/error.h"

namespace drift {

struct PreTokenizer {
  std::string name;                     // as written in the file ("default" when absent)
  std::vector<WordSplitter> splitters;  // applied in order
  bool clean_spaces = true;             // decoding drops spaces before , . ! ? and contractions
  bool ignore_merges = false;           // a word that is itself a token is emitted whole
  bool add_bos = false;                 // default of tokenizer.ggml.add_bos_token
  bool bos_by_default = true;           // false where llama.cpp clears the default BOS id
};

// The pre-tokenizer named `name`; an empty name is llama.cpp's fallback, "default". A name this
// build does not know is an error naming it.
Expected<PreTokenizer> find_pre_tokenizer(std::string_view name);

// Splits text (as code points) into words; returns their lengths in code points.
std::vector<size_t> pre_tokenize(const PreTokenizer& pre, std::span<const uint32_t> cpts);

}  // namespace drift
