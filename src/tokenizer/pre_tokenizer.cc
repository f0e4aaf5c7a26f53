#include "tokenizer/pre_tokenizer.h"

#include <array>
#include <initializer_list>

namespace drift {
namespace {

using enum WordSplitter;

struct PreTokenizerFamily {
  std::initializer_list<std::string_view> names;
  std::initializer_list<WordSplitter> splitters;
  bool clean_spaces;
  bool ignore_merges;
  bool add_bos;
  bool bos_by_default;
};

// The names llama.cpp (at the reference commit) maps to each splitter list, with the flags it sets
// for them. Names with other splitters (DeepSeek, Falcon, ...) are not supported yet.
const std::array<PreTokenizerFamily, 11> kFamilies = {{
    {{"default"},
     {kPunctuationRuns, kGpt2, kNumberRuns, kAsciiDigitTriples},
     true,
     false,
     false,
     true},
    {{"gpt-2", "phi-2", "gigachat", "a.x-4.0", "mellum", "mpt", "olmo", "jais", "exaone4"},
     {kGpt2},
     true,
     false,
     false,
     true},
    {{"trillion", "granite-docling"}, {kGpt2}, false, false, false, true},
    {{"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"},
     {kIsolatedNumbers, kGpt2},
     true,
     false,
     false,
     true},
    {{"smollm", "command-r"}, {kIsolatedNumbers, kGpt2}, false, false, false, true},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
      "jina-v5-nano"},
     {kLlama3},
     true,
     true,
     true,
     true},
    {{"dbrx", "smaug-bpe"}, {kLlama3}, true, false, false, true},
    {{"glm4", "chatglm-bpe"}, {kLlama3}, true, false, false, false},
    {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open"},
     {kQwen2},
     false,
     false,
     false,
     true},
    {{"megrez", "stablelm2"}, {kQwen2}, true, false, false, true},
    {{"gpt-4o", "llama4", "kanana2", "talkie"}, {kGpt4o}, false, false, false, true},
}};

}  // namespace

Expected<PreTokenizer> find_pre_tokenizer(std::string_view name) {
  const std::string_view key = name.empty() ? "default" : name;
  for (const PreTokenizerFamily& family : kFamilies) {
    for (const std::string_view candidate : family.names) {
      if (candidate != key) continue;
      PreTokenizer pre;
      pre.name = std::string(key);
      pre.splitters.assign(family.splitters.begin(), family.splitters.end());
      pre.clean_spaces = family.clean_spaces;
      pre.ignore_merges = family.ignore_merges;
      pre.add_bos = family.add_bos;
      pre.bos_by_default = family.bos_by_default;
      return pre;
    }
  }
  return make_error("unsupported pre-tokenizer '{}' (tokenizer.ggml.pre)", name);
}

std::vector<size_t> pre_tokenize(const PreTokenizer& pre, std::span<const uint32_t> cpts) {
  std::vector<size_t> words;
  if (cpts.empty()) return words;
  words.push_back(cpts.size());
  for (const WordSplitter splitter : pre.splitters) words = split_words(splitter, cpts, words);
  return words;
}

}  // namespace drift
