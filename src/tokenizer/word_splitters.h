// The word splitters of llama.cpp's BPE pre-tokenizers, written as scanners over code points.
//
// A pre-tokenizer is a list of regexes applied in turn; each one refines the previous segmentation
// by splitting every segment into its matches and the text between them, never joining segments.
// Each splitter here reproduces one of those regexes exactly as llama.cpp evaluates it (its
// hand-written scanners for the GPT-2, Llama 3 and Qwen 2 patterns, std::regex semantics for the
// simple ones), including how a pattern sees the end of a segment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace drift {

enum class WordSplitter {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*
  //   |\s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3,
  // As kLlama3 with \p{N} (single digits) instead of \p{N}{1,3}.
  kQwen2,
  // gpt-4o / gpt-oss (o200k), as llama.cpp runs it through std::regex on its category-collapsed
  // text (every letter outside ASCII is both "upper" and "lower" there):
  // [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|
  //   '[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+
  //   ((?=[\p{L}])([^A-Z]))*(?:...)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|
  //   \s+(?!\S)|\s+
  kGpt4o,
  // \p{N}: every number character on its own.
  kIsolatedNumbers,
  // \p{N}+
  kNumberRuns,
  // [\p{P}\$\+<=>\^~\|]+
  kPunctuationRuns,
  // [0-9][0-9][0-9]
  kAsciiDigitTriples,
};

// Splits each segment of `segments` (lengths in code points, covering `cpts` in order) and
// returns the refined lengths.
std::vector<size_t> split_words(WordSplitter splitter, std::span<const uint32_t> cpts,
                                std::span<const size_t> segments);

}  // namespace drift
