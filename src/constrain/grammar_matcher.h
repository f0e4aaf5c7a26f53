// One sequence's llguidance matcher as a TokenConstraint (util/token_constraint.h).
#pragma once

#include <memory>

#include "util/token_constraint.h"

struct LlgMatcher;

namespace drift {

class GrammarMatcher final : public TokenConstraint {
 public:
  // Takes ownership of a matcher llguidance created without error.
  explicit GrammarMatcher(LlgMatcher* matcher);
  ~GrammarMatcher() override;
  GrammarMatcher(const GrammarMatcher&) = delete;
  GrammarMatcher& operator=(const GrammarMatcher&) = delete;

  Status fill_mask(std::span<uint32_t> mask) override;
  Status accept(int32_t token) override;
  bool complete() const override;

 private:
  LlgMatcher* matcher_;
  size_t mask_words_;  // llguidance's mask: one bit per token of the vocabulary it was given
};

}  // namespace drift
