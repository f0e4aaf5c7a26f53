// Constrained decoding as the layers below the engine see it: a grammar a request asks its output
// to follow (GrammarSpec, a plain value), and the per-sequence matcher that enforces it
// (TokenConstraint). The scheduler carries a sequence's matcher in each StepPlan item, the
// executor asks it for the allowed tokens before sampling, and the scheduler advances it with
// each committed token. The one implementation is constrain/ (llguidance); tests use fakes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "util/error.h"

namespace drift {

enum class GrammarKind : uint8_t {
  kJsonSchema,  // source: a JSON schema (JSON text)
  kJsonObject,  // any JSON object; source unused
  kRegex,       // source: a regular expression the whole output must match
  kLark,        // source: a grammar in llguidance's Lark syntax
};
// "json_schema", "json_object", "regex", "lark".
inline std::string_view grammar_kind_name(GrammarKind kind) {
  switch (kind) {
    case GrammarKind::kJsonSchema:
      return "json_schema";
    case GrammarKind::kJsonObject:
      return "json_object";
    case GrammarKind::kRegex:
      return "regex";
    case GrammarKind::kLark:
      return "lark";
  }
  return "unknown";
}

struct GrammarSpec {
  GrammarKind kind = GrammarKind::kJsonObject;
  std::string source;
  bool operator==(const GrammarSpec&) const = default;
};

// Most bytes of a grammar's source a request may carry; larger ones are refused before any
// compilation, so that a client cannot make the engine compile megabytes of schema.
inline constexpr size_t kMaxGrammarSourceBytes = 64 * 1024;

// Words of an allowed-token mask over `n_vocab` tokens: token t is allowed when bit t % 32 of word
// t / 32 is set.
inline constexpr int64_t token_mask_words(int64_t n_vocab) { return (n_vocab + 31) / 32; }

// One sequence's matcher. Used by one thread at a time (the executor's sampling thread for its
// row, then the engine worker), never concurrently.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Writes the tokens the grammar allows next into `mask` (token_mask_words(n_vocab) words; bits
  // past the grammar's vocabulary are cleared). An error if the matcher failed or allows nothing.
  virtual Status fill_mask(std::span<uint32_t> mask) = 0;
  // Advances past a committed token; an error if the grammar does not allow it.
  virtual Status accept(int32_t token) = 0;
  // True once the output is complete: the grammar matched and allows no further token.
  virtual bool complete() const = 0;
  // A matcher at the same position with state of its own: a grammar compiled once serves every
  // sequence submitted with it (Request::compiled_grammar). Safe to call from several threads on
  // a matcher that none of them advances.
  virtual std::unique_ptr<TokenConstraint> clone() const = 0;
  // Speculative decoding. Writes into `out` (at most out.size()) the tokens the grammar forces
  // next — the only continuation its rules allow, such as a JSON key and its quotes — and returns
  // how many (0: none forced, or the constraint cannot tell). They are drafts: the model may
  // still choose another tokenization of the same text, which verification under the masks finds.
  virtual int32_t forced_tokens(std::span<int32_t> out) {
    (void)out;
    return 0;
  }
};

}  // namespace drift
