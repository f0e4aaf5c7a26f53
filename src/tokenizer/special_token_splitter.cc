#include "tokenizer/special_token_splitter.h"

#include <algorithm>

namespace drift {

SpecialTokenSplitter::SpecialTokenSplitter(const Vocab& vocab) : vocab_(&vocab) {
  token_at_node_.emplace_back();  // the root
  const std::vector<int32_t>& specials = vocab.special_tokens();
  for (uint32_t rank = 0; rank < specials.size(); ++rank) {
    uint32_t node = 0;
    for (const char c : vocab.text(specials[rank])) {
      const uint64_t key = (uint64_t{node} << 8) | static_cast<uint8_t>(c);
      const auto [it, inserted] = edges_.try_emplace(key, token_at_node_.size());
      if (inserted) token_at_node_.emplace_back();
      node = it->second;
    }
    token_at_node_[node] = rank;
  }
}

std::optional<uint32_t> SpecialTokenSplitter::child(uint32_t node, uint8_t byte) const {
  const auto it = edges_.find((uint64_t{node} << 8) | byte);
  if (it == edges_.end()) return std::nullopt;
  return it->second;
}

std::vector<uint32_t> SpecialTokenSplitter::tokens_present(std::string_view text,
                                                           bool parse_special) const {
  std::vector<uint32_t> present;
  for (size_t start = 0; start < text.size(); ++start) {
    uint32_t node = 0;
    for (size_t i = start; i < text.size(); ++i) {
      const auto next = child(node, static_cast<uint8_t>(text[i]));
      if (!next) break;
      node = *next;
      if (const auto rank = token_at_node_[node]) present.push_back(*rank);
    }
  }
  std::sort(present.begin(), present.end());
  present.erase(std::unique(present.begin(), present.end()), present.end());
  if (!parse_special) {
    std::erase_if(present, [&](uint32_t rank) {
      return vocab_->has_attr(vocab_->special_tokens()[rank],
                              kTokenAttrControl | kTokenAttrUnknown);
    });
  }
  return present;
}

std::vector<TextFragment> SpecialTokenSplitter::split(std::string_view text,
                                                      bool parse_special) const {
  std::vector<TextFragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({TextFragment::Kind::kText, 0, 0, text.size()});
  std::vector<TextFragment> next;
  // Longest special text first; each pass cuts the text fragments left by the previous ones.
  for (const uint32_t rank : tokens_present(text, parse_special)) {
    const int32_t token = vocab_->special_tokens()[rank];
    const std::string_view needle = vocab_->text(token);
    next.clear();
    for (const TextFragment& fragment : fragments) {
      if (fragment.kind == TextFragment::Kind::kToken) {
        next.push_back(fragment);
        continue;
      }
      const std::string_view piece = text.substr(fragment.offset, fragment.length);
      size_t from = 0;
      for (size_t at = piece.find(needle); at != std::string_view::npos;
           at = piece.find(needle, from)) {
        if (at > from) {
          next.push_back({TextFragment::Kind::kText, 0, fragment.offset + from, at - from});
        }
        next.push_back({TextFragment::Kind::kToken, token, 0, 0});
        from = at + needle.size();
      }
      if (from < piece.size()) {
        next.push_back({TextFragment::Kind::kText, 0, fragment.offset + from, piece.size() - from});
      }
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace drift
