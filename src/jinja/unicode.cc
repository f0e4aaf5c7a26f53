#include "jinja/unicode.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>

namespace drift::jinja {
namespace {

// The C.UTF-8 locale gives the C library's Unicode character classes and case tables
// independently of whatever locale the process runs in. Created once, never modified.
locale_t unicode_locale() {
  static const locale_t locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  return locale;
}

struct Range {
  char32_t first;
  char32_t last;
};

bool in_ranges(char32_t c, const Range* ranges, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (c < ranges[i].first) return false;
    if (c <= ranges[i].last) return true;
  }
  return false;
}

}  // namespace

size_t utf8_length(std::string_view text) {
  if (is_ascii(text)) return text.size();
  return decode_utf8(text, Utf8Policy::kStrict).size();
}

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

bool py_isspace(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool py_isprintable(char32_t c) {
  if (c < 0x80) return c >= 0x20 && c < 0x7F;
  // Python's non-printables: control (Cc), format (Cf), surrogate, private use, line/paragraph
  // separators and space separators other than ' ', sorted by first code point.
  static constexpr Range kNonPrintable[] = {
      {0x7F, 0xA0},       {0xAD, 0xAD},       {0x600, 0x605},      {0x61C, 0x61C},
      {0x6DD, 0x6DD},     {0x70F, 0x70F},     {0x890, 0x891},      {0x8E2, 0x8E2},
      {0x1680, 0x1680},   {0x180E, 0x180E},   {0x2000, 0x200F},    {0x2028, 0x202F},
      {0x205F, 0x2064},   {0x2066, 0x206F},   {0x3000, 0x3000},    {0xD800, 0xF8FF},
      {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},   {0xFFFE, 0xFFFF},    {0x110BD, 0x110BD},
      {0x110CD, 0x110CD}, {0x13430, 0x1343F}, {0x1BCA0, 0x1BCA3},  {0x1D173, 0x1D17A},
      {0xE0001, 0xE0001}, {0xE0020, 0xE007F}, {0xF0000, 0x10FFFF},
  };
  return !in_ranges(c, kNonPrintable, std::size(kNonPrintable));
}

bool py_isdigit(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  static constexpr Range kDigits[] = {
      {0xB2, 0xB3},     {0xB9, 0xB9},     {0x660, 0x669},   {0x6F0, 0x6F9},
      {0x966, 0x96F},   {0x9E6, 0x9EF},   {0xE50, 0xE59},   {0x2070, 0x2070},
      {0x2074, 0x2079}, {0x2080, 0x2089}, {0xFF10, 0xFF19},
  };
  return in_ranges(c, kDigits, std::size(kDigits));
}

bool py_isalpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  const locale_t locale = unicode_locale();
  return locale != static_cast<locale_t>(0) && iswalpha_l(static_cast<wint_t>(c), locale);
}

char32_t to_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  const locale_t locale = unicode_locale();
  if (locale == static_cast<locale_t>(0)) return c;
  return static_cast<char32_t>(towupper_l(static_cast<wint_t>(c), locale));
}

char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  const locale_t locale = unicode_locale();
  if (locale == static_cast<locale_t>(0)) return c;
  return static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), locale));
}

bool is_upper(char32_t c) { return to_lower(c) != c; }
bool is_lower(char32_t c) { return to_upper(c) != c; }

std::string upper(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  if (is_ascii(text)) {
    for (char c : text) out.push_back(static_cast<char>(to_upper(static_cast<unsigned char>(c))));
    return out;
  }
  for (char32_t c : decode_utf8(text, Utf8Policy::kStrict))
    append_utf8(to_upper(c), out, Utf8Policy::kStrict);
  return out;
}

std::string lower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  if (is_ascii(text)) {
    for (char c : text) out.push_back(static_cast<char>(to_lower(static_cast<unsigned char>(c))));
    return out;
  }
  for (char32_t c : decode_utf8(text, Utf8Policy::kStrict))
    append_utf8(to_lower(c), out, Utf8Policy::kStrict);
  return out;
}

std::string strip(std::string_view text, bool left, bool right, const std::u32string* chars) {
  const std::u32string points = decode_utf8(text, Utf8Policy::kStrict);
  auto strippable = [&](char32_t c) {
    return chars ? chars->find(c) != std::u32string::npos : py_isspace(c);
  };
  size_t begin = 0;
  size_t end = points.size();
  if (left) {
    while (begin < end && strippable(points[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strippable(points[end - 1])) --end;
  }
  return encode_utf8(std::u32string_view(points).substr(begin, end - begin), Utf8Policy::kStrict);
}

}  // namespace drift::jinja
