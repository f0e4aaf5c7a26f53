// Makes text safe to hand to a client: well-formed UTF-8 passes unchanged, and each ill-formed
// subsequence becomes one U+FFFD — one per maximal subpart, the Unicode-recommended practice that
// WHATWG decoders (and Python's "replace") follow.
#pragma once

#include <string>
#include <string_view>

namespace drift {

// Length of the well-formed UTF-8 prefix of `text` (all of it when it is valid).
size_t valid_utf8_prefix_length(std::string_view text);

// `text` with every ill-formed subsequence replaced by U+FFFD.
std::string repair_utf8(std::string_view text);

}  // namespace drift
