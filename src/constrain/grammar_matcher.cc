#include "constrain/grammar_matcher.h"

#include <llguidance.h>

#include <algorithm>

namespace drift {
namespace {

bool allows(const uint32_t* mask, size_t mask_words, int64_t token) {
  return token >= 0 && size_t(token / 32) < mask_words && (mask[token / 32] >> (token % 32)) & 1u;
}

// The lowest token the mask allows other than `end_token`; -1 when there is none.
int64_t lowest_allowed(const uint32_t* mask, size_t mask_words, int64_t end_token) {
  for (size_t w = 0; w < mask_words; ++w) {
    for (uint32_t bits = mask[w]; bits != 0; bits &= bits - 1) {
      const int64_t token = int64_t(w) * 32 + __builtin_ctz(bits);
      if (token != end_token) return token;
    }
  }
  return -1;
}

// Computes the masks of the first kProbeTokens positions along one path (the lowest allowed token
// other than the end each time), or until the grammar completes. Most grammars that cannot be
// followed fail at the first mask (nothing matches, a rule only recurses); some fail one lexeme
// later, when the parser's next row outgrows its limits (a rule of thousands of alternatives),
// so a few positions are walked.
Status probe_first_tokens(LlgMatcher* probe, size_t mask_words, int32_t end_token) {
  constexpr int kProbeTokens = 4;
  for (int position = 0; position < kProbeTokens; ++position) {
    const uint32_t* mask =
        llg_matcher_compute_mask(probe) == 0 ? llg_matcher_get_mask(probe) : nullptr;
    if (!mask) return make_error("{}", llg_matcher_get_error(probe));
    const int64_t next = lowest_allowed(mask, mask_words, end_token);
    if (next < 0) {
      if (allows(mask, mask_words, end_token)) return Status::Ok();  // complete here
      if (position == 0) return make_error("no output can match it");
      return make_error("no output can continue it after {} tokens", position);
    }
    if (llg_matcher_consume_token(probe, uint32_t(next)) != 0)
      return make_error("{}", llg_matcher_get_error(probe));
    if (llg_matcher_is_stopped(probe)) return Status::Ok();
  }
  return Status::Ok();
}

}  // namespace

GrammarMatcher::GrammarMatcher(LlgMatcher* matcher)
    : matcher_(matcher), mask_words_(llg_matcher_get_mask_byte_size(matcher) / sizeof(uint32_t)) {}

GrammarMatcher::~GrammarMatcher() { llg_free_matcher(matcher_); }

Status GrammarMatcher::check_when_compiled(int32_t end_token, CpuBudget budget) {
  if (const char* error = llg_matcher_get_error(matcher_)) return make_error("{}", error);
  // The probe walks a copy, so this matcher stays at the start of the output. llguidance's fuel
  // limits bound most of its work, but not all of it (a regex such as (a{1000}){1000} spends
  // seconds building lexer states), so a clock is the bound that always holds; the walk checks
  // llguidance's cooperative cancellation in its lexer and parser loops.
  LlgMatcher* probe = llg_clone_matcher(matcher_);
  LlgCancellationHandle* handle = llg_matcher_get_cancellation_handle(probe);
  Status walked;
  const BudgetOutcome outcome =
      run_within_cpu_budget([&] { walked = probe_first_tokens(probe, mask_words_, end_token); },
                            [&] { llg_cancel(handle); }, budget);
  llg_free_cancellation_handle(handle);
  llg_free_matcher(probe);
  switch (outcome) {
    case BudgetOutcome::kFinished:
      return walked;
    case BudgetOutcome::kOverCpuBudget:
      return make_error("it is too costly: its first token masks took over {} ms of CPU time",
                        budget.cpu.count());
    case BudgetOutcome::kOverWallLimit:
      return make_error("it is too costly: its first token masks took over {} ms",
                        budget.wall.count());
  }
  return walked;
}

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

std::unique_ptr<TokenConstraint> GrammarMatcher::clone() const {
  // A deep copy: llguidance copies the lexer state under its own lock.
  return std::make_unique<GrammarMatcher>(llg_clone_matcher(matcher_));
}

int32_t GrammarMatcher::forced_tokens(std::span<int32_t> out) {
  // llguidance's fast-forward tokens: the forced bytes, tokenized. A failure (a matcher in error)
  // only means no draft; the next mask reports the error.
  if (out.empty() || llg_matcher_is_stopped(matcher_) || llg_matcher_is_error(matcher_)) return 0;
  static_assert(sizeof(int32_t) == sizeof(uint32_t));
  const int32_t n =
      llg_matcher_compute_ff_tokens(matcher_, reinterpret_cast<uint32_t*>(out.data()), out.size());
  return std::clamp<int32_t>(n, 0, int32_t(out.size()));
}

}  // namespace drift
