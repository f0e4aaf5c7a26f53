#include "tokenizer/jinja_unicode.h"

#include <locale.h>
#include <wctype.h>

#include <algorithm>

namespace drift::jinja {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

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

std::u32string utf8_decode(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    const auto b0 = static_cast<unsigned char>(text[i]);
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    int extra = 0;
    char32_t cp = 0;
    char32_t min = 0;
    if ((b0 & 0xE0) == 0xC0) {
      extra = 1, cp = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
      extra = 2, cp = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
      extra = 3, cp = b0 & 0x07, min = 0x10000;
    } else {
      out.push_back(kReplacement);
      ++i;
      continue;
    }
    if (i + static_cast<size_t>(extra) >= n) {  // truncated sequence
      out.push_back(kReplacement);
      ++i;
      continue;
    }
    bool valid = true;
    for (int k = 1; k <= extra; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      if ((b & 0xC0) != 0x80) {
        valid = false;
        break;
      }
      cp = (cp << 6) | (b & 0x3F);
    }
    if (!valid || cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      out.push_back(kReplacement);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += extra + 1;
  }
  return out;
}

void utf8_append(std::string& out, char32_t c) {
  if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = kReplacement;
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string utf8_encode(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) utf8_append(out, c);
  return out;
}

size_t utf8_length(std::string_view text) {
  if (is_ascii(text)) return text.size();
  return utf8_decode(text).size();
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
  for (char32_t c : utf8_decode(text)) utf8_append(out, to_upper(c));
  return out;
}

std::string lower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  if (is_ascii(text)) {
    for (char c : text) out.push_back(static_cast<char>(to_lower(static_cast<unsigned char>(c))));
    return out;
  }
  for (char32_t c : utf8_decode(text)) utf8_append(out, to_lower(c));
  return out;
}

std::string strip(std::string_view text, bool left, bool right, const std::u32string* chars) {
  const std::u32string points = utf8_decode(text);
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
  return utf8_encode(std::u32string_view(points).substr(begin, end - begin));
}

}  // namespace drift::jinja
