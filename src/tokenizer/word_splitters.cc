#include "tokenizer/word_splitters.h"

#include <algorithm>

#include "tokenizer/unicode_categories.h"

namespace drift {
namespace {

// One segment [begin, end) of the text being split into words. Positions past the end behave as
// the patterns see the end of the input: no class matches there.
class Segment {
 public:
  Segment(std::span<const uint32_t> cpts, size_t begin, size_t end, std::vector<size_t>& words)
      : cpts_(cpts), begin_(begin), end_(end), words_(words) {}

  size_t begin() const { return begin_; }
  size_t end() const { return end_; }
  bool in(size_t p) const { return p < end_; }
  uint32_t at(size_t p) const { return cpts_[p]; }
  bool is(size_t p, uint32_t c) const { return in(p) && cpts_[p] == c; }
  bool letter(size_t p) const {
    return in(p) && codepoint_class(cpts_[p]) == CodepointClass::kLetter;
  }
  bool number(size_t p) const {
    return in(p) && codepoint_class(cpts_[p]) == CodepointClass::kNumber;
  }
  bool space(size_t p) const { return in(p) && is_unicode_whitespace(cpts_[p]); }
  bool newline(size_t p) const { return is(p, '\r') || is(p, '\n'); }
  // [^\s\p{L}\p{N}]
  bool other(size_t p) const { return in(p) && !space(p) && !letter(p) && !number(p); }

  // Ends the current word at `p` (which must not be before it) and returns `p`.
  size_t cut(size_t p) {
    if (p > word_begin_) words_.push_back(p - word_begin_);
    word_begin_ = p;
    return p;
  }

 private:
  std::span<const uint32_t> cpts_;
  size_t begin_;
  size_t end_;
  std::vector<size_t>& words_;
  size_t word_begin_ = begin_;
};

uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c; }

// 's 't 'm 'd 're 've 'll at p: the end of the contraction, or p when there is none.
size_t contraction_end(const Segment& s, size_t p, bool ignore_case) {
  if (!s.is(p, '\'') || !s.in(p + 1)) return p;
  const auto lower = [&](uint32_t c) { return ignore_case ? ascii_lower(c) : c; };
  const uint32_t c1 = lower(s.at(p + 1));
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return p + 2;
  if (!s.in(p + 2)) return p;
  const uint32_t c2 = lower(s.at(p + 2));
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
    return p + 3;
  }
  return p;
}

// \s+(?!\S)|\s+ at p (a whitespace run): a run followed by more text leaves its last character to
// start the next word.
size_t whitespace_run_end(const Segment& s, size_t p) {
  size_t q = p;
  while (s.space(q)) ++q;
  if (q - p > 1 && s.in(q)) return q - 1;
  return q;
}

void split_gpt2(Segment& s) {
  size_t p = s.begin();
  while (p < s.end()) {
    if (size_t q = contraction_end(s, p, /*ignore_case=*/false); q != p) {
      p = s.cut(q);
      continue;
    }
    // " ?X+" for X in letters, numbers, other: an optional leading space joins the run.
    const size_t run = p + (s.at(p) == ' ' ? 1 : 0);
    size_t q = run;
    if (s.letter(run)) {
      while (s.letter(q)) ++q;
    } else if (s.number(run)) {
      while (s.number(q)) ++q;
    } else if (s.other(run)) {
      while (s.other(q)) ++q;
    } else if (s.space(p)) {
      q = whitespace_run_end(s, p);
    } else {
      q = p + 1;
    }
    p = s.cut(q);
  }
}

void split_llama3(Segment& s, size_t max_digits) {
  size_t p = s.begin();
  while (p < s.end()) {
    if (size_t q = contraction_end(s, p, /*ignore_case=*/true); q != p) {
      p = s.cut(q);
      continue;
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!s.newline(p) && !s.number(p) && (s.letter(p) || s.letter(p + 1))) {
      size_t q = p + 1;
      while (s.letter(q)) ++q;
      p = s.cut(q);
      continue;
    }
    // \p{N}{1,max_digits}, repeatedly
    if (s.number(p)) {
      size_t group_begin = p;
      while (s.number(p)) {
        ++p;
        if (p - group_begin == max_digits) group_begin = s.cut(p);
      }
      p = s.cut(p);
      continue;
    }
    // " ?[^\s\p{L}\p{N}]+[\r\n]*"
    if (const size_t run = p + (s.at(p) == ' ' ? 1 : 0); s.other(run)) {
      size_t q = run;
      while (s.other(q)) ++q;
      while (s.newline(q)) ++q;
      p = s.cut(q);
      continue;
    }
    // \s*[\r\n]+ : a whitespace run containing line breaks ends after its last one.
    size_t q = p;
    size_t after_last_newline = p;
    while (s.space(q)) {
      if (s.newline(q)) after_last_newline = q + 1;
      ++q;
    }
    if (after_last_newline > p) {
      p = s.cut(after_last_newline);
    } else if (q > p) {
      p = s.cut(whitespace_run_end(s, p));
    } else {
      p = s.cut(p + 1);
    }
  }
}

// kGpt4o's classes as std::regex sees llama.cpp's collapsed text: ASCII stays itself (\s is
// the C locale's six spaces), everything else is its category; "upper" ([^a-z] letters) and
// "lower" ([^A-Z] letters) overlap on every letter outside ASCII.
class Gpt4oClasses {
 public:
  explicit Gpt4oClasses(const Segment& s) : s_(s) {}
  bool space(size_t p) const {
    if (!s_.in(p)) return false;
    const uint32_t c = s_.at(p);
    return c < 128 ? c == ' ' || (c >= '\t' && c <= '\r') : is_unicode_whitespace(c);
  }
  // Whitespace outranks the category when llama.cpp collapses a code point.
  bool letter(size_t p) const { return !space(p) && s_.letter(p); }
  bool number(size_t p) const { return !space(p) && s_.number(p); }
  bool upper(size_t p) const { return letter(p) && !(s_.at(p) >= 'a' && s_.at(p) <= 'z'); }
  bool lower(size_t p) const { return letter(p) && !(s_.at(p) >= 'A' && s_.at(p) <= 'Z'); }
  // [^\r\n\p{L}\p{N}]
  bool prefix(size_t p) const { return s_.in(p) && !s_.newline(p) && !letter(p) && !number(p); }
  // [^\s\p{L}\p{N}]
  bool other(size_t p) const { return s_.in(p) && !space(p) && !letter(p) && !number(p); }
  size_t run_end(size_t p, bool (Gpt4oClasses::*in_class)(size_t) const) const {
    while ((this->*in_class)(p)) ++p;
    return p;
  }

 private:
  const Segment& s_;
};

// The end of the regex's first two alternatives at p, or p if neither matches. Alternative 1,
// P? U* L+ C?, backtracks its greedy U* until a lower letter follows; alternative 2, P? U+ L* C?,
// never needs to. Each first tries with the prefix character, then without.
size_t gpt4o_word_end(const Segment& s, const Gpt4oClasses& k, size_t p) {
  for (const size_t s0 : {p + 1, p}) {
    if (s0 == p + 1 && !k.prefix(p)) continue;
    const size_t upper_end = k.run_end(s0, &Gpt4oClasses::upper);
    for (size_t j = upper_end + 1; j-- > s0;) {
      if (k.lower(j))
        return contraction_end(s, k.run_end(j, &Gpt4oClasses::lower), /*ignore_case=*/true);
    }
  }
  for (const size_t s0 : {p + 1, p}) {
    if (s0 == p + 1 && !k.prefix(p)) continue;
    if (!k.upper(s0)) continue;
    const size_t end = k.run_end(k.run_end(s0, &Gpt4oClasses::upper), &Gpt4oClasses::lower);
    return contraction_end(s, end, /*ignore_case=*/true);
  }
  return p;
}

void split_gpt4o(Segment& s) {
  const Gpt4oClasses k(s);
  size_t p = s.begin();
  while (p < s.end()) {
    if (size_t q = gpt4o_word_end(s, k, p); q != p) {
      p = s.cut(q);
      continue;
    }
    // \p{N}{1,3}
    if (k.number(p)) {
      size_t q = p;
      while (k.number(q) && q - p < 3) ++q;
      p = s.cut(q);
      continue;
    }
    // " ?[^\s\p{L}\p{N}]+[\r\n/]*"
    if (const size_t run = p + (s.at(p) == ' ' ? 1 : 0); k.other(run)) {
      size_t q = k.run_end(run, &Gpt4oClasses::other);
      while (s.newline(q) || s.is(q, '/')) ++q;
      p = s.cut(q);
      continue;
    }
    // \s*[\r\n]+ : a whitespace run containing line breaks ends after its last one; then
    // \s+(?!\S)|\s+ (every character left here is whitespace).
    size_t q = p;
    size_t after_last_newline = p;
    while (k.space(q)) {
      if (s.newline(q)) after_last_newline = q + 1;
      ++q;
    }
    if (after_last_newline > p) {
      p = s.cut(after_last_newline);
    } else if (q - p > 1 && s.in(q)) {
      p = s.cut(q - 1);
    } else {
      p = s.cut(std::max(q, p + 1));
    }
  }
}

// A regex matching runs of one class, min_run..max_run long, leftmost first: the matches are words
// and so is the text between two matches.
template <typename IsMember>
void split_runs(Segment& s, IsMember is_member, size_t min_run, size_t max_run) {
  size_t p = s.begin();
  while (p < s.end()) {
    size_t q = p;
    while (q - p < max_run && s.in(q) && is_member(s.at(q))) ++q;
    if (q - p >= min_run && q > p) {
      s.cut(p);  // the text before the match
      p = s.cut(q);
    } else {
      ++p;
    }
  }
  s.cut(s.end());
}

bool is_number_cpt(uint32_t c) { return codepoint_class(c) == CodepointClass::kNumber; }

// [\p{P}\$\+<=>\^~\|]: every ASCII punctuation or symbol character but the backquote, and
// punctuation elsewhere.
bool is_punctuation_run_cpt(uint32_t c) {
  if (c < 128)
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x5F) ||
           (c >= 0x7B && c <= 0x7E);
  return codepoint_class(c) == CodepointClass::kPunctuation;
}

bool is_ascii_digit(uint32_t c) { return c >= '0' && c <= '9'; }

constexpr size_t kUnbounded = static_cast<size_t>(-1);

}  // namespace

std::vector<size_t> split_words(WordSplitter splitter, std::span<const uint32_t> cpts,
                                std::span<const size_t> segments) {
  std::vector<size_t> words;
  words.reserve(segments.size() * 2);
  size_t begin = 0;
  for (const size_t length : segments) {
    Segment s(cpts, begin, begin + length, words);
    switch (splitter) {
      case WordSplitter::kGpt2:
        split_gpt2(s);
        break;
      case WordSplitter::kLlama3:
        split_llama3(s, 3);
        break;
      case WordSplitter::kQwen2:
        split_llama3(s, 1);
        break;
      case WordSplitter::kGpt4o:
        split_gpt4o(s);
        break;
      case WordSplitter::kIsolatedNumbers:
        split_runs(s, is_number_cpt, 1, 1);
        break;
      case WordSplitter::kNumberRuns:
        split_runs(s, is_number_cpt, 1, kUnbounded);
        break;
      case WordSplitter::kPunctuationRuns:
        split_runs(s, is_punctuation_run_cpt, 1, kUnbounded);
        break;
      case WordSplitter::kAsciiDigitTriples:
        split_runs(s, is_ascii_digit, 3, 3);
        break;
    }
    begin += length;
  }
  return words;
}

}  // namespace drift
