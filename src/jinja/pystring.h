// Python str methods over UTF-8 text, shared by the filters (trim, replace, title, indent, ...)
// and the string methods templates call (split, startswith, ...). Positions and lengths are in
// code points, as in Python.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace drift::jinja {

// str.split(sep, maxsplit) / str.rsplit: without `sep`, splits on runs of whitespace and drops
// empty parts. `maxsplit` < 0 means no limit.
std::vector<std::string> py_split(std::string_view text, const std::optional<std::string>& sep,
                                  int64_t maxsplit, bool from_right);
// str.splitlines(keepends): splits on \n, \r\n, \r, \v, \f, \x1c-\x1e, \x85, \u2028, \u2029.
std::vector<std::string> py_splitlines(std::string_view text, bool keepends);
// str.replace(old, new, count); `count` < 0 replaces all. An empty `old` inserts `new` between
// code points. Fails (returns nullopt) if the result would exceed `max_bytes`.
std::optional<std::string> py_replace(std::string_view text, std::string_view old,
                                      std::string_view replacement, int64_t count,
                                      size_t max_bytes);
// str.capitalize(): first character upper case, the rest lower case.
std::string py_capitalize(std::string_view text);
// str.title(): upper case after every uncased character, lower case elsewhere.
std::string py_title(std::string_view text);
// jinja2's title filter: each word (split at whitespace, -, (, {, [, <) capitalised.
std::string jinja_title(std::string_view text);
// str.find / str.rfind over code points; -1 if absent.
int64_t py_find(std::string_view text, std::string_view needle, bool from_right);
// Number of non-overlapping occurrences (str.count).
int64_t py_count(std::string_view text, std::string_view needle);
// markupsafe.escape: & < > " ' as HTML entities.
std::string html_escape(std::string_view text);

// Python's str.isdigit/isalpha/isalnum/isspace/islower/isupper (false for empty text).
bool py_isdigit_text(std::string_view text);
bool py_isalpha_text(std::string_view text);
bool py_isalnum_text(std::string_view text);
bool py_isspace_text(std::string_view text);
bool py_islower_text(std::string_view text);
bool py_isupper_text(std::string_view text);

}  // namespace drift::jinja
