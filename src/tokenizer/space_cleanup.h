// clean_up_tokenization_spaces as llama.cpp's detokenizer applies it for byte-level BPE models
// that ask for it: drop the space before , . ! ?, join " ' " into "'", and drop the space before
// the contractions 's 'm 're 've (not 't 'd 'll).
#pragma once

#include <string>
#include <string_view>

namespace drift {

std::string clean_up_tokenization_spaces(std::string_view text);

// Whether text can be cut before position `cut` and cleaned in two parts with the same result as
// cleaning it whole: true when the two bytes before the cut are neither spaces nor apostrophes,
// since no rule looks further than that across such a pair.
bool is_space_cleanup_boundary(std::string_view text, size_t cut);

}  // namespace drift
