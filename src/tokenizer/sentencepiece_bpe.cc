#include "tokenizer/sentencepiece_bpe.h"

#include <algorithm>
#include <queue>

#include "util/utf8.h"

namespace drift {
namespace {

struct Symbol {
  uint32_t begin = 0;  // byte offset in the text
  uint32_t size = 0;   // 0 once joined into its left neighbour
  int32_t prev = -1;
  int32_t next = -1;
};

struct Pair {
  float score;
  int32_t left;
  int32_t right;
  uint32_t size;  // left.size + right.size when queued
};

// Highest score first; among equal scores the leftmost pair.
struct PairAfter {
  bool operator()(const Pair& a, const Pair& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

std::optional<int32_t> sentencepiece_byte_token(const Vocab& vocab, uint8_t byte) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const char name[6] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
  if (const auto id = vocab.find(std::string_view(name, 6))) return id;
  const char raw = static_cast<char>(byte);
  if (const auto id = vocab.find(std::string_view(&raw, 1))) return id;
  return vocab.special.unk;
}

void encode_sentencepiece(const Vocab& vocab, std::string_view text, std::vector<int32_t>& out) {
  std::vector<Symbol> symbols;
  for (size_t offset = 0; offset < text.size();) {
    const size_t n =
        std::min(utf8_sequence_length(static_cast<uint8_t>(text[offset])), text.size() - offset);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(offset), static_cast<uint32_t>(n), index - 1,
                       offset + n == text.size() ? -1 : index + 1});
    offset += n;
  }
  if (symbols.empty()) return;

  std::priority_queue<Pair, std::vector<Pair>, PairAfter> queue;
  const auto queue_pair = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    if (const auto id = vocab.find(text.substr(l.begin, l.size + r.size))) {
      queue.push({vocab.score(*id), left, right, l.size + r.size});
    }
  };
  for (size_t i = 1; i < symbols.size(); ++i) {
    queue_pair(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  }
  while (!queue.empty()) {
    const Pair pair = queue.top();
    queue.pop();
    Symbol& left = symbols[pair.left];
    Symbol& right = symbols[pair.right];
    if (left.size == 0 || right.size == 0 || left.size + right.size != pair.size) continue;
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = pair.left;
    queue_pair(left.prev, pair.left);
    queue_pair(pair.left, left.next);
  }

  // Every joined symbol is a token; a single character may not be, and goes out as bytes.
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].begin, symbols[i].size);
    if (const auto id = vocab.find(piece)) {
      out.push_back(*id);
      continue;
    }
    for (const char byte : piece) {
      if (const auto id = sentencepiece_byte_token(vocab, static_cast<uint8_t>(byte))) {
        out.push_back(*id);
      }
    }
  }
}

}  // namespace drift
