#include "jinja/pystring.h"

#include <algorithm>

#include "jinja/unicode.h"

namespace drift::jinja {
namespace {

std::string encode_range(const std::u32string& points, size_t begin, size_t end) {
  return encode_utf8(std::u32string_view(points).substr(begin, end - begin), Utf8Policy::kStrict);
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1C && c <= 0x1E) ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

}  // namespace

std::vector<std::string> py_split(std::string_view text, const std::optional<std::string>& sep,
                                  int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep) {
    // Exact separator: byte search is code-point correct for valid UTF-8.
    if (!from_right) {
      size_t start = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        const size_t at = text.find(*sep, start);
        if (at == std::string_view::npos) break;
        parts.emplace_back(text.substr(start, at - start));
        start = at + sep->size();
      }
      parts.emplace_back(text.substr(start));
      return parts;
    }
    size_t end = text.size();
    std::vector<std::string> reversed;
    while (maxsplit < 0 || static_cast<int64_t>(reversed.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t at = text.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      reversed.emplace_back(text.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    reversed.emplace_back(text.substr(0, end));
    return std::vector<std::string>(reversed.rbegin(), reversed.rend());
  }
  // Runs of whitespace.
  const std::u32string points = decode_utf8(text, Utf8Policy::kStrict);
  const size_t n = points.size();
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < n && py_isspace(points[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
        size_t end = n;
        while (end > i && py_isspace(points[end - 1])) --end;
        parts.push_back(encode_range(points, i, end));
        break;
      }
      size_t j = i;
      while (j < n && !py_isspace(points[j])) ++j;
      parts.push_back(encode_range(points, i, j));
      i = j;
    }
    return parts;
  }
  size_t i = n;
  std::vector<std::string> reversed;
  while (true) {
    while (i > 0 && py_isspace(points[i - 1])) --i;
    if (i == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(reversed.size()) >= maxsplit) {
      size_t begin = 0;
      while (begin < i && py_isspace(points[begin])) ++begin;
      reversed.push_back(encode_range(points, begin, i));
      break;
    }
    size_t j = i;
    while (j > 0 && !py_isspace(points[j - 1])) --j;
    reversed.push_back(encode_range(points, j, i));
    i = j;
  }
  return std::vector<std::string>(reversed.rbegin(), reversed.rend());
}

std::vector<std::string> py_splitlines(std::string_view text, bool keepends) {
  const std::u32string points = decode_utf8(text, Utf8Policy::kStrict);
  std::vector<std::string> lines;
  size_t start = 0;
  size_t i = 0;
  while (i < points.size()) {
    if (!is_line_break(points[i])) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    if (points[i] == '\r' && end < points.size() && points[end] == '\n') ++end;
    lines.push_back(encode_range(points, start, keepends ? end : i));
    start = i = end;
  }
  if (start < points.size()) lines.push_back(encode_range(points, start, points.size()));
  return lines;
}

std::optional<std::string> py_replace(std::string_view text, std::string_view old,
                                      std::string_view replacement, int64_t count,
                                      size_t max_bytes) {
  std::string out;
  auto append = [&](std::string_view s) {
    if (out.size() + s.size() > max_bytes) return false;
    out.append(s);
    return true;
  };
  int64_t done = 0;
  if (old.empty()) {
    const std::u32string points = decode_utf8(text, Utf8Policy::kStrict);
    for (size_t i = 0; i <= points.size(); ++i) {
      if (count < 0 || done < count) {
        if (!append(replacement)) return std::nullopt;
        ++done;
      }
      if (i < points.size()) {
        std::string one;
        append_utf8(points[i], one, Utf8Policy::kStrict);
        if (!append(one)) return std::nullopt;
      }
    }
    return out;
  }
  size_t start = 0;
  while (count < 0 || done < count) {
    const size_t at = text.find(old, start);
    if (at == std::string_view::npos) break;
    if (!append(text.substr(start, at - start)) || !append(replacement)) return std::nullopt;
    start = at + old.size();
    ++done;
  }
  if (!append(text.substr(start))) return std::nullopt;
  return out;
}

std::string py_capitalize(std::string_view text) {
  const std::u32string points = decode_utf8(text, Utf8Policy::kStrict);
  std::string out;
  for (size_t i = 0; i < points.size(); ++i) {
    append_utf8(i == 0 ? to_upper(points[i]) : to_lower(points[i]), out, Utf8Policy::kStrict);
  }
  return out;
}

std::string py_title(std::string_view text) {
  std::string out;
  bool previous_cased = false;
  for (char32_t c : decode_utf8(text, Utf8Policy::kStrict)) {
    append_utf8(previous_cased ? to_lower(c) : to_upper(c), out, Utf8Policy::kStrict);
    previous_cased = is_cased(c);
  }
  return out;
}

std::string jinja_title(std::string_view text) {
  // Words start after whitespace or one of -({[<; each becomes item[0].upper() + rest.lower().
  std::string out;
  bool word_start = true;
  for (char32_t c : decode_utf8(text, Utf8Policy::kStrict)) {
    const bool separator =
        py_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (separator) {
      append_utf8(c, out, Utf8Policy::kStrict);
      word_start = true;
    } else {
      append_utf8(word_start ? to_upper(c) : to_lower(c), out, Utf8Policy::kStrict);
      word_start = false;
    }
  }
  return out;
}

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

int64_t py_find(std::string_view text, std::string_view needle, bool from_right) {
  const size_t at = from_right ? text.rfind(needle) : text.find(needle);
  if (at == std::string_view::npos) return -1;
  return static_cast<int64_t>(utf8_length(text.substr(0, at)));
}

int64_t py_count(std::string_view text, std::string_view needle) {
  if (needle.empty()) return static_cast<int64_t>(utf8_length(text)) + 1;
  int64_t n = 0;
  for (size_t at = text.find(needle); at != std::string_view::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

namespace {

template <typename Predicate>
bool all_of_text(std::string_view text, Predicate predicate) {
  const std::u32string points = decode_utf8(text, Utf8Policy::kStrict);
  return !points.empty() && std::all_of(points.begin(), points.end(), predicate);
}

// islower/isupper: at least one cased character and no cased character of the other case.
bool cased_text(std::string_view text, bool want_lower) {
  bool any_cased = false;
  for (char32_t c : decode_utf8(text, Utf8Policy::kStrict)) {
    if (want_lower ? is_upper(c) : is_lower(c)) return false;
    if (is_cased(c)) any_cased = true;
  }
  return any_cased;
}

}  // namespace

bool py_isdigit_text(std::string_view text) { return all_of_text(text, py_isdigit); }
bool py_isalpha_text(std::string_view text) { return all_of_text(text, py_isalpha); }
bool py_isalnum_text(std::string_view text) {
  return all_of_text(text, [](char32_t c) { return py_isalpha(c) || py_isdigit(c); });
}
bool py_isspace_text(std::string_view text) { return all_of_text(text, py_isspace); }
bool py_islower_text(std::string_view text) { return cased_text(text, true); }
bool py_isupper_text(std::string_view text) { return cased_text(text, false); }

}  // namespace drift::jinja
