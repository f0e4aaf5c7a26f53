#include "constrain/grammar_matcher.h"

#include <llguidance.h>

#include <algorithm>

namespace drift {

GrammarMatcher::GrammarMatcher(LlgMatcher* matcher)
    : matcher_(matcher), mask_words_(llg_matcher_get_mask_byte_size(matcher) / sizeof(uint32_t)) {}

GrammarMatcher::~GrammarMatcher() { llg_free_matcher(matcher_); }

Status GrammarMatcher::fill_mask(std::span<uint32_t> mask) {
  if (mask.size() < mask_words_)
    return make_error("token mask of {} words, the grammar's vocabulary needs {}", mask.size(),
                      mask_words_);
  if (llg_matcher_compute_mask_into(matcher_, mask.data(), mask_words_ * sizeof(uint32_t)) != 0)
    return make_error("grammar: {}", llg_matcher_get_error(matcher_));
  // Tokens past the tokenizer's vocabulary (a model's padding rows) are never allowed.
  std::fill(mask.begin() + ptrdiff_t(mask_words_), mask.end(), 0u);
  const bool any = std::any_of(mask.begin(), mask.begin() + ptrdiff_t(mask_words_),
                               [](uint32_t w) { return w != 0; });
  if (!any) return make_error("grammar: no token can continue the output");
  return Status::Ok();
}

Status GrammarMatcher::accept(int32_t token) {
  if (token < 0 || llg_matcher_consume_token(matcher_, uint32_t(token)) != 0)
    return make_error("grammar: token {} is not allowed here: {}", token,
                      llg_matcher_is_error(matcher_) ? llg_matcher_get_error(matcher_) : "");
  return Status::Ok();
}

bool GrammarMatcher::complete() const { return llg_matcher_is_stopped(matcher_); }

}  // namespace drift
