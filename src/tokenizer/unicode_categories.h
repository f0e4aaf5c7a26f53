// Code point classes the pre-tokenizers test (\p{L}, \p{N}, \s, ...), defined exactly as
// llama.cpp's tables define them (Unicode 15.1 general categories, plus the White_Space property),
// so that words split at the same places.
#pragma once

#include <cstdint>

namespace drift {

// One class per code point: the general category's first letter, except that unassigned code
// points (Cn) are kUndefined rather than kControl.
enum class CodepointClass : uint8_t {
  kUndefined,
  kNumber,       // \p{N}
  kLetter,       // \p{L}
  kSeparator,    // \p{Z}
  kMark,         // \p{M}
  kPunctuation,  // \p{P}
  kSymbol,       // \p{S}
  kControl,      // \p{C} except Cn
};

// kUndefined for values past U+10FFFF.
CodepointClass codepoint_class(uint32_t cpt);

// The Unicode White_Space property (what \s matches in the pre-tokenizer regexes).
bool is_unicode_whitespace(uint32_t cpt);

}  // namespace drift
