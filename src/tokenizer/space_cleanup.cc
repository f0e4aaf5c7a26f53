#include "tokenizer/space_cleanup.h"

#include <vector>

namespace drift {
namespace {

bool is_clause_punctuation(char c) { return c == '?' || c == '!' || c == '.' || c == ','; }

// " ?" " !" " ." " ," lose their space.
std::string drop_space_before_punctuation(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (i > 0 && in[i - 1] == ' ' && is_clause_punctuation(in[i])) out.pop_back();
    out.push_back(in[i]);
  }
  return out;
}

// " ' " becomes "'". The space after the apostrophe is consumed, so it cannot also serve as the
// space before a following apostrophe.
std::string join_lone_apostrophes(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  bool prev_consumed = false;  // in[i - 1] was a space consumed by the rule
  for (size_t i = 0; i < in.size(); ++i) {
    const bool prev_is_space = i > 0 && in[i - 1] == ' ' && !prev_consumed;
    prev_consumed = false;
    if (i > 0 && in[i] == '\'' && i + 1 < in.size() && prev_is_space && in[i + 1] == ' ') {
      out.pop_back();
      out.push_back(in[i]);
      ++i;  // skip the space after
      prev_consumed = true;
      continue;
    }
    out.push_back(in[i]);
  }
  return out;
}

// " 's" " 'm" " 're" " 've" lose their space.
std::string attach_contractions(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  const size_t n = in.size();
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && in[i - 1] == ' ' && in[i] == '\'' && i + 1 < n) {
      const char c1 = in[i + 1];
      const bool short_form = c1 == 's' || c1 == 'm';
      const bool long_form = c1 != 't' && c1 != 'd' && !short_form && i + 2 < n &&
                             ((c1 == 'r' && in[i + 2] == 'e') || (c1 == 'v' && in[i + 2] == 'e'));
      if (short_form || long_form) out.pop_back();
    }
    out.push_back(in[i]);
  }
  return out;
}

bool is_space_or_apostrophe(char c) { return c == ' ' || c == '\''; }

}  // namespace

std::string clean_up_tokenization_spaces(std::string_view text) {
  return attach_contractions(join_lone_apostrophes(drop_space_before_punctuation(text)));
}

bool is_space_cleanup_boundary(std::string_view text, size_t cut) {
  return cut >= 2 && cut <= text.size() && !is_space_or_apostrophe(text[cut - 1]) &&
         !is_space_or_apostrophe(text[cut - 2]);
}

}  // namespace drift
