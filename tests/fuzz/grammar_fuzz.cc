// libFuzzer target for the grammar front ends: the first input byte picks the kind (JSON schema,
// regex, Lark), the rest is the source, compiled by llguidance over a real model's tokenizer
// ($DRIFT_FUZZ_TOKENIZER_GGUF, by default the cached SmolLM2). Any source must compile or be
// refused with a message, within the compile budget (GrammarLimits) plus slack, and a compiled
// grammar must give a mask that allows some token at its start: that is the promise the engine
// relies on when it accepts a request.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "constrain/grammar_compiler.h"
#include "fuzz_model.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace {

std::unique_ptr<drift::Tokenizer> tokenizer;
std::unique_ptr<drift::GrammarCompiler> compiler;

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "fuzz_grammar: %s\n", message.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  auto file = drift::GgufFile::open(drift::fuzz::model_path());
  if (!file.ok()) fail(file.error().message);
  auto loaded = drift::Tokenizer::from_gguf(*file);
  if (!loaded.ok()) fail(loaded.error().message);
  tokenizer = std::make_unique<drift::Tokenizer>(std::move(*loaded));
  auto created = drift::GrammarCompiler::create(*tokenizer);
  if (!created.ok()) fail(created.error().message);
  compiler = std::move(*created);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static constexpr drift::GrammarKind kKinds[] = {
      drift::GrammarKind::kJsonSchema, drift::GrammarKind::kRegex, drift::GrammarKind::kLark};
  const drift::GrammarKind kind = kKinds[data[0] % 3];
  const std::string source(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto started = std::chrono::steady_clock::now();
  auto matcher = compiler->compile({kind, source});
  const auto took = std::chrono::steady_clock::now() - started;
  // Compiling the grammar itself is not under the clock (llguidance's size limits bound it);
  // the masks are. A second of slack covers a fuzzing machine's stalls.
  if (took > drift::GrammarLimits{}.first_masks.wall + std::chrono::seconds(5)) abort();
  if (!matcher.ok()) {
    if (matcher.error().message.empty()) abort();
    return 0;
  }
  std::vector<uint32_t> mask(size_t(drift::token_mask_words(tokenizer->vocab_size())));
  // Accepted, so its first mask must work.
  if (drift::Status s = (*matcher)->fill_mask(mask); !s.ok()) fail("first mask: " + s.message());
  return 0;
}
