#include "tokenizer/byte_level_bpe.h"

#include <algorithm>
#include <queue>
#include <string>

#include "tokenizer/byte_level_mapping.h"
#include "util/utf8.h"

namespace drift {
namespace {

// A run of the word's characters; merging grows the left symbol and empties the right one.
struct Symbol {
  uint32_t begin = 0;  // byte offset in the word
  uint32_t size = 0;   // 0 once merged into its left neighbour
  int32_t prev = -1;   // neighbours in the linked list of live symbols; -1 at the ends
  int32_t next = -1;
};

// A mergeable pair as it was when queued; stale once either side has changed size.
struct Pair {
  int32_t rank;
  int32_t left;
  int32_t right;
  uint32_t size;  // left.size + right.size when queued
};

// Lowest rank first; among equal ranks the leftmost pair.
struct PairAfter {
  bool operator()(const Pair& a, const Pair& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

class WordMerger {
 public:
  explicit WordMerger(const Vocab& vocab) : vocab_(vocab) {}

  // Appends the tokens of one word (already written in the byte-level alphabet).
  void encode(std::string_view word, std::vector<int32_t>& out) {
    if (vocab_.pre.ignore_merges) {
      if (const auto id = vocab_.find(word)) {
        out.push_back(*id);
        return;
      }
    }
    split_characters(word);
    merge(word);
    emit(word, out);
  }

 private:
  void split_characters(std::string_view word) {
    symbols_.clear();
    for (size_t offset = 0; offset < word.size();) {
      const size_t n =
          std::min(utf8_sequence_length(static_cast<uint8_t>(word[offset])), word.size() - offset);
      const auto index = static_cast<int32_t>(symbols_.size());
      symbols_.push_back({static_cast<uint32_t>(offset), static_cast<uint32_t>(n), index - 1,
                          offset + n == word.size() ? -1 : index + 1});
      offset += n;
    }
  }

  std::string_view text(std::string_view word, const Symbol& s) const {
    return word.substr(s.begin, s.size);
  }

  void queue_pair(std::string_view word, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols_[left];
    const Symbol& r = symbols_[right];
    if (const auto rank = vocab_.merge_rank(text(word, l), text(word, r))) {
      queue_.push({*rank, left, right, l.size + r.size});
    }
  }

  void merge(std::string_view word) {
    queue_ = {};
    for (size_t i = 1; i < symbols_.size(); ++i) {
      queue_pair(word, static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
    }
    while (!queue_.empty()) {
      const Pair pair = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[pair.left];
      Symbol& right = symbols_[pair.right];
      if (left.size == 0 || right.size == 0 || left.size + right.size != pair.size) continue;
      left.size += right.size;
      right.size = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = pair.left;
      queue_pair(word, left.prev, pair.left);
      queue_pair(word, pair.left, left.next);
    }
  }

  // A symbol that is not a token (a merge whose result is missing from the vocabulary) falls
  // back to its single bytes, each kept only if it is a token by itself, as in llama.cpp.
  void emit(std::string_view word, std::vector<int32_t>& out) const {
    for (const Symbol& s : symbols_) {
      if (s.size == 0) continue;
      const std::string_view symbol = text(word, s);
      if (const auto id = vocab_.find(symbol)) {
        out.push_back(*id);
        continue;
      }
      for (size_t i = 0; i < symbol.size(); ++i) {
        if (const auto id = vocab_.find(symbol.substr(i, 1))) out.push_back(*id);
      }
    }
  }

  const Vocab& vocab_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Pair, std::vector<Pair>, PairAfter> queue_;
};

}  // namespace

void encode_byte_level_bpe(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) {
  std::vector<uint32_t> cpts;
  cpts.reserve(text.size());
  decode_utf8(text, Utf8Policy::kLenient, cpts);
  WordMerger merger(vocab);
  std::string utf8;
  std::string word;
  size_t begin = 0;
  for (const size_t length : pre_tokenize(vocab.pre, cpts)) {
    // The word's UTF-8 bytes (invalid input was replaced by U+FFFD), each written as its
    // byte-level character.
    utf8.clear();
    for (size_t i = begin; i < begin + length; ++i)
      append_utf8(cpts[i], utf8, Utf8Policy::kLenient);
    word.clear();
    for (const char byte : utf8)
      append_utf8(byte_level_codepoint(static_cast<uint8_t>(byte)), word, Utf8Policy::kLenient);
    merger.encode(word, out);
    begin += length;
  }
}

}  // namespace drift
