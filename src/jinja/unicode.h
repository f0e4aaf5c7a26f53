// Python's str semantics for the Jinja interpreter. Python strings are sequences of code points
// while drift keeps UTF-8 bytes, so every operation whose result depends on characters (len,
// indexing, slicing, strip, upper/lower) goes through these to give the answer Python would.
// Text is decoded and encoded by util/utf8.h under its strict policy: a byte that does not start a
// well-formed sequence is U+FFFD, so arbitrary bytes never stop a render.
#pragma once

#include <string>
#include <string_view>

#include "util/utf8.h"

namespace drift::jinja {

// Number of code points (what Python's len() gives for the same text).
size_t utf8_length(std::string_view text);
bool is_ascii(std::string_view text);

// Python's str.isspace() for one code point (Unicode White_Space plus the ASCII separators
// \x1c-\x1f), used by strip(), split() and Jinja's whitespace control.
bool py_isspace(char32_t c);
// Python's str.isprintable() for one code point, used by repr() to choose escapes. Unassigned
// code points count as printable here (Python escapes them).
bool py_isprintable(char32_t c);
bool py_isdigit(char32_t c);
bool py_isalpha(char32_t c);

// Simple (one-to-one) case mappings from the C library's Unicode tables. Python uses the full
// mappings, which differ for a handful of characters (e.g. 'ß'.upper() is 'SS' in Python).
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);
bool is_upper(char32_t c);
bool is_lower(char32_t c);
inline bool is_cased(char32_t c) { return is_upper(c) || is_lower(c); }

// Whole-string forms of the above.
std::string upper(std::string_view text);
std::string lower(std::string_view text);

// Python's str.strip/lstrip/rstrip: without `chars` strips whitespace, otherwise any of the code
// points in `chars`.
std::string strip(std::string_view text, bool left, bool right, const std::u32string* chars);

}  // namespace drift::jinja
