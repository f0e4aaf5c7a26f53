// One sequence's llguidance matcher as a TokenConstraint (util/token_constraint.h).
#pragma once

#include <memory>

#include "util/cpu_budget.h"
#include "util/token_constraint.h"

struct LlgMatcher;

namespace drift {

class GrammarMatcher final : public TokenConstraint {
 public:
  // Takes ownership of a matcher as llguidance created it (it may hold an error: see
  // check_when_compiled).
  explicit GrammarMatcher(LlgMatcher* matcher);
  ~GrammarMatcher() override;
  GrammarMatcher(const GrammarMatcher&) = delete;
  GrammarMatcher& operator=(const GrammarMatcher&) = delete;

  // The checks of a new matcher, run where the grammar is compiled: llguidance's own error (a
  // grammar that does not parse or is over its size limits), then the masks of the first few
  // positions along one path (on a copy), computed within `budget` on a thread below the engine's
  // priority (util/cpu_budget.h). A grammar that no output can
  // follow (rules that only recurse, an empty regex), that outgrows the parser's limits at once
  // (a rule of thousands of alternatives) or whose lexer is too costly fails here, on the
  // submitting thread, instead of in a step of the engine, where it would stall every sequence
  // and come back as the server's fault. `end_token` is the token that ends the output.
  Status check_when_compiled(int32_t end_token, CpuBudget budget);

  Status fill_mask(std::span<uint32_t> mask) override;
  Status accept(int32_t token) override;
  bool complete() const override;
  std::unique_ptr<TokenConstraint> clone() const override;
  int32_t forced_tokens(std::span<int32_t> out) override;

 private:
  LlgMatcher* matcher_;
  size_t mask_words_;  // llguidance's mask: one bit per token of the vocabulary it was given
};

}  // namespace drift
