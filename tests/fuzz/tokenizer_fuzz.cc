// libFuzzer target for a real model's tokenizer ($DRIFT_FUZZ_TOKENIZER_GGUF, by default the cached
// SmolLM2; run_fuzzers.sh also runs it on Gemma 3's SentencePiece vocabulary). Any text, valid
// UTF-8 or not, must encode to ids inside the vocabulary that decode without error, and to at
// least as many tokens as the server's byte bound promises (tokenizer/prompt_bound.h), which
// refuses prompts unread on that promise.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_model.h"
#include "gguf/gguf_file.h"
#include "tokenizer/prompt_bound.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Loaded {
  drift::Tokenizer tokenizer;
  drift::PromptBound bound;
};
std::optional<Loaded> loaded;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string path = drift::fuzz::model_path();
  auto file = drift::GgufFile::open(path);
  if (!file.ok()) {
    std::fprintf(stderr, "fuzz_tokenizer: %s\n", file.error().message.c_str());
    std::exit(2);
  }
  auto tokenizer = drift::Tokenizer::from_gguf(*file);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "fuzz_tokenizer: %s\n", tokenizer.error().message.c_str());
    std::exit(2);
  }
  drift::PromptBound bound = drift::PromptBound::from(*tokenizer);
  bound.find_dropped_ascii([&](const std::string& text) {
    return tokenizer->encode(text, {.add_special = false, .parse_special = false}).size();
  });
  loaded.emplace(Loaded{std::move(*tokenizer), bound});
  std::fprintf(stderr, "fuzz_tokenizer: %s, %d tokens, at most %zu bytes per token\n", path.c_str(),
               loaded->tokenizer.vocab_size(), bound.max_bytes_per_token());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const drift::Tokenizer& tokenizer = loaded->tokenizer;
  for (const bool parse_special : {true, false}) {
    const std::vector<int32_t> ids =
        tokenizer.encode(text, {.add_special = false, .parse_special = parse_special});
    const size_t counted = loaded->bound.counted_bytes(text);
    if (int64_t(ids.size()) < loaded->bound.min_tokens(counted)) {
      std::fprintf(stderr, "%zu bytes (%zu counted) became %zu tokens, below the bound of %lld\n",
                   text.size(), counted, ids.size(), (long long)loaded->bound.min_tokens(counted));
      abort();
    }
    for (int32_t id : ids)
      if (id < 0 || id >= tokenizer.vocab_size()) abort();
    if (!tokenizer.decode(ids, {.render_special = true}).ok()) abort();
  }
  return 0;
}
