// The pre-tokenizer word splitters: worked examples of each pattern, and agreement with the regexes
// they implement (run through PCRE2) on random text mixing every character class they test.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/word_splitters.h"

#include <gtest/gtest.h>
#include <pcre2.h>

#include <random>
#include <string>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "util/utf8.h"

namespace drift {
namespace {

std::vector<uint32_t> cpts_of(std::string_view text) {
  std::vector<uint32_t> cpts;
  decode_utf8(text, Utf8Policy::kLenient, cpts);
  return cpts;
}

std::vector<std::string> words_of(std::string_view text, const std::vector<size_t>& lengths) {
  const std::vector<uint32_t> cpts = cpts_of(text);
  std::vector<std::string> words;
  size_t begin = 0;
  for (const size_t n : lengths) {
    std::string word;
    for (size_t i = begin; i < begin + n; ++i) append_utf8(cpts[i], word, Utf8Policy::kLenient);
    words.push_back(word);
    begin += n;
  }
  return words;
}

std::vector<std::string> split(std::string_view pre_name, std::string_view text) {
  const auto pre = find_pre_tokenizer(pre_name);
  EXPECT_TRUE(pre.ok());
  return words_of(text, pre_tokenize(*pre, cpts_of(text)));
}

using Words = std::vector<std::string>;

TEST(WordSplitters, Gpt2KeepsALeadingSpaceWithItsWord) {
  EXPECT_EQ(split("gpt-2", "Hello world's  test\n"),
            (Words{"Hello", " world", "'s", " ", " test", "\n"}));
  EXPECT_EQ(split("gpt-2", "abc123 45 ?!x"), (Words{"abc", "123", " 45", " ?!", "x"}));
  EXPECT_EQ(split("gpt-2", "a  "), (Words{"a", "  "}));
  EXPECT_EQ(split("gpt-2", "DON'T"), (Words{"DON", "'", "T"}));  // contractions are lower case
}

TEST(WordSplitters, Llama3GroupsDigitsInThreesAndEndsLineBreakRuns) {
  EXPECT_EQ(split("llama-bpe", "I'M 12345 ok\n\n  x"),
            (Words{"I", "'M", " ", "123", "45", " ok", "\n\n", " ", " x"}));
  EXPECT_EQ(split("llama3", "x.\n\ny"), (Words{"x", ".\n\n", "y"}));
}

TEST(WordSplitters, Gpt4oSplitsCaseRunsAndKeepsSlashesAfterPunctuation) {
  EXPECT_EQ(split("gpt-4o", "camelCase HTTPServer's HELLO  world"),
            (Words{"camel", "Case", " HTTPServer's", " HELLO", " ", " world"}));
  EXPECT_EQ(split("gpt-4o", "12345 a//b\n\nÉCOLE"),
            (Words{"123", "45", " a", "//", "b", "\n\n", "É", "COLE"}));
}

TEST(WordSplitters, Qwen2SplitsEveryDigit) {
  EXPECT_EQ(split("qwen2", "v12345"), (Words{"v", "1", "2", "3", "4", "5"}));
}

TEST(WordSplitters, SmolLmIsolatesDigitsBeforeTheGpt2Split) {
  EXPECT_EQ(split("smollm", "a1b22 c ٣4"), (Words{"a", "1", "b", "2", "2", " c", " ", "٣", "4"}));
}

TEST(WordSplitters, DefaultSplitsPunctuationThenDigitTriples) {
  EXPECT_EQ(split("default", "Hello!! 1234567 `x`"),
            (Words{"Hello", "!!", " ", "123", "456", "7", " `", "x", "`"}));
  EXPECT_EQ(split("", "12 ab"), (Words{"12", " ab"}));  // a missing name means "default"
}

TEST(WordSplitters, UnknownPreTokenizerNamesTheValue) {
  const auto pre = find_pre_tokenizer("mystery-bpe");
  ASSERT_FALSE(pre.ok());
  EXPECT_EQ(pre.error().message, "unsupported pre-tokenizer 'mystery-bpe' (tokenizer.ggml.pre)");
}

// --- agreement with the regexes ---

// \s as the pre-tokenizers mean it (the White_Space property); PCRE2's \s leaves out U+0085.
constexpr std::string_view kSpace = "\\t-\\r\\x{85}\\p{Z}";

std::string expand(std::string pattern) {
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"\\S", "[^" + std::string(kSpace) + "]"},
        {"[^\\s", "[^" + std::string(kSpace)},
        {"\\s", "[" + std::string(kSpace) + "]"}}) {
    for (size_t at = pattern.find(from); at != std::string::npos;
         at = pattern.find(from, at + to.size())) {
      pattern.replace(at, from.size(), to);
    }
  }
  return pattern;
}

class Regex {
 public:
  explicit Regex(const std::string& pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    EXPECT_NE(code_, nullptr) << "bad pattern " << pattern << " at " << offset;
    data_ = pcre2_match_data_create_from_pattern(code_, nullptr);
  }
  ~Regex() {
    pcre2_match_data_free(data_);
    pcre2_code_free(code_);
  }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // The regex's matches and the text between them, as llama.cpp splits with a regex.
  Words split(std::string_view text) const {
    Words words;
    size_t start = 0;
    while (start < text.size()) {
      const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                                 start, 0, data_, nullptr);
      if (rc < 0) break;
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data_);
      if (ovector[0] > start) words.emplace_back(text.substr(start, ovector[0] - start));
      words.emplace_back(text.substr(ovector[0], ovector[1] - ovector[0]));
      start = ovector[1];
    }
    if (start < text.size()) words.emplace_back(text.substr(start));
    return words;
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_data* data_ = nullptr;
};

// Characters of every class the patterns distinguish, all classified the same in PCRE2's Unicode
// version and in Unicode 15.1.
const std::vector<std::string> kAlphabet = {
    "a",      "b",      "Z",    "s",      "t",  "r",  "e",      "v",   "l",  "m",      "d",
    "S",      "T",      "L",    "'",      " ",  " ",  " ",      "\t",  "\n", "\r",     "\v",
    "0",      "7",      "9",    ".",      ",",  "!",  "$",      "+",   "<",  "|",      "`",
    "_",      "é",      "ß",    "Ж",      "中", "ー", "٣",      "½",   "Ⅻ",  "\u00a0", "\u3000",
    "\u2003", "\u0085", "🙂", "\u0301", "‘",  "—",  "\u200b", "\x01"};

std::string random_text(std::mt19937& rng) {
  std::uniform_int_distribution<size_t> length(0, 24);
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string text;
  for (size_t n = length(rng); n > 0; --n) text += kAlphabet[pick(rng)];
  return text;
}

struct SplitterPattern {
  WordSplitter splitter;
  std::string pattern;
};

const std::vector<SplitterPattern>& splitter_patterns() {
  static const std::vector<SplitterPattern> patterns = {
      {WordSplitter::kGpt2,
       "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"},
      {WordSplitter::kLlama3,
       "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
       "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
      {WordSplitter::kQwen2,
       "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
       "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
      // As llama.cpp's GPT4O regex_exprs (its rewrite of o200k's case classes as lookaheads).
      {WordSplitter::kGpt4o,
       "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+"
       "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
       "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*"
       "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
       "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
      {WordSplitter::kIsolatedNumbers, "\\p{N}"},
      {WordSplitter::kNumberRuns, "\\p{N}+"},
      {WordSplitter::kPunctuationRuns, "[\\p{P}\\$\\+<=>\\^~\\|]+"},
      {WordSplitter::kAsciiDigitTriples, "[0-9][0-9][0-9]"},
  };
  return patterns;
}

TEST(WordSplitters, AgreeWithTheirRegexesOnRandomText) {
  std::mt19937 rng(20240611);
  for (const SplitterPattern& sp : splitter_patterns()) {
    const Regex regex(expand(sp.pattern));
    for (int i = 0; i < 3000; ++i) {
      const std::string text = random_text(rng);
      const std::vector<uint32_t> cpts = cpts_of(text);
      const std::vector<size_t> whole = {cpts.size()};
      const auto words = words_of(
          text, split_words(sp.splitter, cpts, cpts.empty() ? std::vector<size_t>{} : whole));
      ASSERT_EQ(words, regex.split(text)) << sp.pattern << " on \"" << text << "\"";
    }
  }
}

// A pre-tokenizer applies its regexes in turn, each within the words the previous one made.
TEST(WordSplitters, PipelinesAgreeWithTheirRegexesApplied) {
  std::mt19937 rng(7);
  const auto pattern_of = [](WordSplitter s) {
    for (const SplitterPattern& sp : splitter_patterns()) {
      if (sp.splitter == s) return expand(sp.pattern);
    }
    return std::string();
  };
  for (const std::string_view name : {"default", "smollm", "gpt-2", "llama-bpe", "qwen2"}) {
    const auto pre = find_pre_tokenizer(name);
    ASSERT_TRUE(pre.ok());
    for (int i = 0; i < 2000; ++i) {
      const std::string text = random_text(rng);
      Words expected = text.empty() ? Words{} : Words{text};
      for (const WordSplitter s : pre->splitters) {
        const Regex regex(pattern_of(s));
        Words next;
        for (const std::string& word : expected) {
          for (std::string& w : regex.split(word)) next.push_back(std::move(w));
        }
        expected = std::move(next);
      }
      ASSERT_EQ(words_of(text, pre_tokenize(*pre, cpts_of(text))), expected)
          << name << " on \"" << text << "\"";
    }
  }
}

}  // namespace
}  // namespace drift
