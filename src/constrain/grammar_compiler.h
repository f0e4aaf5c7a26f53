// Compiles a request's grammar (GrammarSpec) into a matcher for one sequence, over a model's
// tokenizer. Built once per model: llguidance indexes the vocabulary (every token's bytes, in a
// trie) when the compiler is created, and each compile then takes milliseconds for a typical
// JSON schema. Thread-safe: requests compile on their submitting threads.
#pragma once

#include <memory>

#include "tokenizer/tokenizer.h"
#include "util/cpu_budget.h"
#include "util/error.h"
#include "util/token_constraint.h"

struct LlgTokenizer;

namespace drift {

// What one grammar may cost before it is accepted: the CPU time to compute the masks of its
// first few positions (GrammarMatcher::check_when_compiled), and how long the submitter waits for
// them. It bounds the work a hostile grammar makes the machine do; a real schema's first masks
// take a few milliseconds.
struct GrammarLimits {
  CpuBudget first_masks{std::chrono::milliseconds(250), std::chrono::milliseconds(2000)};
};

class GrammarCompiler {
 public:
  // `tokenizer` is copied (cheap: its vocabulary is shared). The end-of-sequence token the
  // grammar allows once complete is the tokenizer's EOT, else its EOS, else its first EOG token.
  static Expected<std::unique_ptr<GrammarCompiler>> create(const Tokenizer& tokenizer,
                                                           const GrammarLimits& limits = {});
  ~GrammarCompiler();
  GrammarCompiler(const GrammarCompiler&) = delete;
  GrammarCompiler& operator=(const GrammarCompiler&) = delete;

  // A fresh matcher at the start of the output, or an error naming what is wrong with the
  // grammar (llguidance's message: a schema keyword it does not know, a regex that does not
  // parse, a grammar over its size limits, a source over kMaxGrammarSourceBytes; a schema nested
  // past util/json_limits.h's depth; a grammar no output can follow, or whose first masks take
  // more than the budget). Those masks are computed while the caller waits, on a thread below
  // the engine's priority.
  Expected<std::unique_ptr<TokenConstraint>> compile(const GrammarSpec& spec) const;

  int32_t end_token() const { return end_token_; }

 private:
  GrammarCompiler(std::unique_ptr<Tokenizer> tokenizer, const GrammarLimits& limits)
      : tokenizer_(std::move(tokenizer)), limits_(limits) {}

  // Heap-held so that the address llguidance's tokenize callback keeps stays valid.
  std::unique_ptr<Tokenizer> tokenizer_;
  GrammarLimits limits_;
  LlgTokenizer* llg_ = nullptr;
  int32_t end_token_ = 0;
};

}  // namespace drift
