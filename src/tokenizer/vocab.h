// A tokenizer vocabulary as llama.cpp reads it from GGUF metadata: token texts, scores and
// attributes, BPE merge ranks, special-token ids, the end-of-generation set and the flags that
// steer encoding and decoding. Built once by load_vocab() and never changed afterwards; the string
// views it holds point into its own storage, so a Vocab is neither copied nor moved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/token_kinds.h"
#include "util/error.h"

namespace drift {

struct SpecialTokenIds {
  std::optional<int32_t> bos, eos, eot, eom, unk, sep, pad, mask;
  std::optional<int32_t> fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
};

// Strings stored back to back. Views into it are taken only once everything is added: adding may
// move the buffer, moving the arena does not.
class StringArena {
 public:
  // Returns the offset of the stored copy.
  size_t add(std::string_view text);
  std::string_view view(size_t offset, size_t size) const { return {data_.data() + offset, size}; }
  void reserve(size_t bytes) { data_.reserve(bytes); }
  size_t size() const { return data_.size(); }

 private:
  std::vector<char> data_;
};

struct StringViewPairHash {
  size_t operator()(const std::pair<std::string_view, std::string_view>& p) const {
    const size_t a = std::hash<std::string_view>{}(p.first);
    const size_t b = std::hash<std::string_view>{}(p.second);
    return a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
  }
};

class Vocab {
 public:
  Vocab() = default;
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;

  VocabType type = VocabType::kSentencePiece;
  PreTokenizer pre;  // byte-level BPE only

  SpecialTokenIds special;
  std::vector<int32_t> eog_ids;  // ascending
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // SentencePiece: a space is prepended to text after a special
  bool clean_spaces = false;      // decoding applies clean_up_tokenization_spaces

  int32_t size() const { return static_cast<int32_t>(scores_.size()); }
  bool contains(int32_t id) const { return id >= 0 && id < size(); }
  std::string_view text(int32_t id) const { return texts_.view(text_offsets_[id], text_size(id)); }
  float score(int32_t id) const { return scores_[id]; }
  uint32_t attr(int32_t id) const { return attrs_[id]; }
  bool has_attr(int32_t id, uint32_t mask) const { return (attrs_[id] & mask) != 0; }
  std::optional<int32_t> find(std::string_view text) const;
  // Rank of the merge "left right" (lower merges first); nullopt when there is no such merge.
  std::optional<int32_t> merge_rank(std::string_view left, std::string_view right) const;
  // The token's text when decoded, with control and unknown tokens rendered (see token_pieces.h).
  std::string_view piece(int32_t id) const;
  // Control, user-defined and unknown tokens: longest text first, then lowest id.
  const std::vector<int32_t>& special_tokens() const { return special_tokens_; }

  // Building, in this order (load_vocab and the text-based rules of special_tokens.h only).
  void add_token(std::string_view text, float score, uint32_t attr);
  void add_merge(std::string_view left, std::string_view right);  // ranked in order of adding
  // Indexes texts and merges once all are added; two tokens with the same text are an error.
  Status index();
  void set_attr(int32_t id, uint32_t attr) { attrs_[id] = attr; }
  // Once the attributes are final.
  void build_pieces();
  void build_special_tokens();

 private:
  size_t text_size(int32_t id) const { return text_offsets_[id + 1] - text_offsets_[id]; }

  struct PendingMerge {
    size_t left_offset, left_size, right_offset, right_size;
  };

  StringArena texts_;
  std::vector<size_t> text_offsets_ = {0};  // token i is [offsets[i], offsets[i+1])
  std::vector<float> scores_;
  std::vector<uint32_t> attrs_;
  std::unordered_map<std::string_view, int32_t> ids_by_text_;
  StringArena merge_texts_;
  std::vector<PendingMerge> pending_merges_;
  std::unordered_map<std::pair<std::string_view, std::string_view>, int32_t, StringViewPairHash>
      merge_ranks_;
  StringArena pieces_;
  std::vector<size_t> piece_offsets_;
  std::vector<int32_t> special_tokens_;
};

}  // namespace drift
