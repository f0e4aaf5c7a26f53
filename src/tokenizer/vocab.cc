#include "tokenizer/vocab.h"

#include <algorithm>

#include "tokenizer/token_pieces.h"

namespace drift {

size_t StringArena::add(std::string_view text) {
  const size_t offset = data_.size();
  data_.insert(data_.end(), text.begin(), text.end());
  return offset;
}

std::optional<int32_t> Vocab::find(std::string_view text) const {
  const auto it = ids_by_text_.find(text);
  if (it == ids_by_text_.end()) return std::nullopt;
  return it->second;
}

std::optional<int32_t> Vocab::merge_rank(std::string_view left, std::string_view right) const {
  const auto it = merge_ranks_.find({left, right});
  if (it == merge_ranks_.end()) return std::nullopt;
  return it->second;
}

std::string_view Vocab::piece(int32_t id) const {
  return pieces_.view(piece_offsets_[id], piece_offsets_[id + 1] - piece_offsets_[id]);
}

void Vocab::add_token(std::string_view text, float score, uint32_t attr) {
  texts_.add(text);
  text_offsets_.push_back(texts_.size());
  scores_.push_back(score);
  attrs_.push_back(attr);
}

void Vocab::add_merge(std::string_view left, std::string_view right) {
  const size_t left_offset = merge_texts_.add(left);
  const size_t right_offset = merge_texts_.add(right);
  pending_merges_.push_back({left_offset, left.size(), right_offset, right.size()});
}

Status Vocab::index() {
  ids_by_text_.reserve(scores_.size());
  for (int32_t id = 0; id < size(); ++id) {
    const auto [it, inserted] = ids_by_text_.emplace(text(id), id);
    if (!inserted) {
      return make_error("tokenizer.ggml.tokens: token {} has the same text as token {} ('{}')", id,
                        it->second, text(id));
    }
  }
  merge_ranks_.reserve(pending_merges_.size());
  for (size_t rank = 0; rank < pending_merges_.size(); ++rank) {
    const PendingMerge& m = pending_merges_[rank];
    // A repeated merge keeps its first (best) rank.
    merge_ranks_.emplace(std::pair{merge_texts_.view(m.left_offset, m.left_size),
                                   merge_texts_.view(m.right_offset, m.right_size)},
                         static_cast<int32_t>(rank));
  }
  pending_merges_ = {};
  return Status::Ok();
}

void Vocab::build_pieces() {
  piece_offsets_.assign(1, 0);
  piece_offsets_.reserve(scores_.size() + 1);
  for (int32_t id = 0; id < size(); ++id) {
    pieces_.add(render_token_piece(type, text(id), attr(id)));
    piece_offsets_.push_back(pieces_.size());
  }
}

void Vocab::build_special_tokens() {
  special_tokens_.clear();
  for (int32_t id = 0; id < size(); ++id) {
    if (has_attr(id, kTokenAttrControl | kTokenAttrUserDefined | kTokenAttrUnknown)) {
      special_tokens_.push_back(id);
    }
  }
  // llama.cpp sorts by length only (std::sort, so equal lengths come in no defined order); ties
  // matter only for two equally long special texts that overlap in the input.
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(),
                   [&](int32_t a, int32_t b) { return text_size(a) > text_size(b); });
}

}  // namespace drift
