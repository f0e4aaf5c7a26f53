#include "tokenizer/special_tokens.h"

#include <algorithm>
#include <array>
#include <optional>
#include <set>
#include <string_view>

namespace drift {
namespace {

// The texts by which llama.cpp recognises each kind of special token when metadata does not name
// it.
constexpr std::array<std::string_view, 11> kEotTexts = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",  // granite
    "<EOT>",
    "_<EOT>",
    "[EOT]",                  // Kimi-K2
    "<｜end▁of▁sentence｜>",  // DeepSeek
    "<end_of_utterance>",     // SmolDocling
};
constexpr std::array<std::string_view, 1> kEomTexts = {"<|eom_id|>"};
constexpr std::array<std::string_view, 8> kFimPreTexts = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",    "<｜fim▁begin｜>",
    "<PRE>",          "▁<PRE>",       "<|code_prefix|>", "<|prefix|>",
};
constexpr std::array<std::string_view, 8> kFimSufTexts = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",    "<｜fim▁hole｜>",
    "<SUF>",          "▁<SUF>",       "<|code_suffix|>", "<|suffix|>",
};
constexpr std::array<std::string_view, 8> kFimMidTexts = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>",    "<｜fim▁end｜>",
    "<MID>",          "▁<MID>",       "<|code_middle|>", "<|middle|>",
};
constexpr std::array<std::string_view, 5> kFimPadTexts = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>",
                                                          "<PAD>", "[PAD]"};
constexpr std::array<std::string_view, 5> kFimRepTexts = {"<|fim_repo|>", "<|repo_name|>",
                                                          "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::array<std::string_view, 1> kFimSepTexts = {"<|file_sep|>"};

// Texts that end generation whatever their token's role.
constexpr std::array<std::string_view, 22> kEogTexts = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
};

// gpt-oss: llama.cpp always renders these as text.
constexpr std::array<std::string_view, 4> kAlwaysRenderedTexts = {"<|channel|>", "<|message|>",
                                                                  "<|start|>", "<|constrain|>"};

template <size_t N>
bool is_one_of(std::string_view text, const std::array<std::string_view, N>& texts) {
  return std::find(texts.begin(), texts.end(), text) != texts.end();
}

void mark_control(Vocab& vocab, int32_t id) {
  vocab.set_attr(id, vocab.attr(id) | kTokenAttrControl);
}

// Fills `slot` (when metadata left it empty) with the lowest id whose text is one of `texts`,
// and makes that token a control token.
template <size_t N>
void detect_by_text(Vocab& vocab, std::optional<int32_t>& slot,
                    const std::array<std::string_view, N>& texts) {
  if (slot) return;
  for (const std::string_view text : texts) {
    const auto id = vocab.find(text);
    if (id && (!slot || *id < *slot)) slot = id;
  }
  if (slot) mark_control(vocab, *slot);
}

void mark_unused_control_tokens(Vocab& vocab) {
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.has_attr(id, kTokenAttrControl) &&
        vocab.text(id).find("unused") != std::string_view::npos) {
      vocab.set_attr(id, vocab.attr(id) | kTokenAttrUnused);
    }
  }
}

std::set<int32_t> collect_eog(Vocab& vocab) {
  const SpecialTokenIds& s = vocab.special;
  std::set<int32_t> eog;
  for (const auto& id : {s.fim_pad, s.fim_rep, s.fim_sep}) {
    if (id) eog.insert(*id);
  }
  for (const std::string_view text : kEogTexts) {
    if (const auto id = vocab.find(text)) {
      eog.insert(*id);
      mark_control(vocab, *id);
    }
  }
  for (const std::string_view text : kAlwaysRenderedTexts) {
    if (const auto id = vocab.find(text)) vocab.set_attr(*id, kTokenAttrUserDefined);
  }
  for (const auto& id : {s.eos, s.eot, s.eom}) {
    if (id) eog.insert(*id);
  }
  return eog;
}

// Two tokenizers reuse EOG texts for other roles, which llama.cpp undoes: with "<|return|>" and
// "<|call|>" (gpt-oss), or "<|calls|>" and "<|flush|>" (Solar Open), "<|end|>" only ends a message;
// with "<|tool_response>" (Gemma 4), "</s>" is ordinary text.
void apply_eog_exceptions(Vocab& vocab, std::set<int32_t>& eog) {
  const auto text_in_eog = [&](std::string_view text) -> std::optional<int32_t> {
    const auto id = vocab.find(text);
    if (id && eog.count(*id)) return id;
    return std::nullopt;
  };
  const bool has_return = text_in_eog("<|return|>").has_value();
  const bool has_call = text_in_eog("<|call|>") || text_in_eog("<|calls|>");
  const bool has_flush = text_in_eog("<|flush|>").has_value();
  if (const auto end = text_in_eog("<|end|>"); end && has_call && (has_return || has_flush)) {
    eog.erase(*end);
    vocab.set_attr(*end, kTokenAttrUserDefined);
  }
  if (const auto s = text_in_eog("</s>"); s && text_in_eog("<|tool_response>")) {
    eog.erase(*s);
    vocab.set_attr(*s, kTokenAttrNormal);
  }
}

}  // namespace

void apply_special_token_rules(Vocab& vocab) {
  SpecialTokenIds& s = vocab.special;
  detect_by_text(vocab, s.eot, kEotTexts);
  detect_by_text(vocab, s.eom, kEomTexts);
  detect_by_text(vocab, s.fim_pre, kFimPreTexts);
  detect_by_text(vocab, s.fim_suf, kFimSufTexts);
  detect_by_text(vocab, s.fim_mid, kFimMidTexts);
  detect_by_text(vocab, s.fim_pad, kFimPadTexts);
  detect_by_text(vocab, s.fim_rep, kFimRepTexts);
  detect_by_text(vocab, s.fim_sep, kFimSepTexts);
  mark_unused_control_tokens(vocab);
  std::set<int32_t> eog = collect_eog(vocab);
  apply_eog_exceptions(vocab, eog);
  vocab.eog_ids.assign(eog.begin(), eog.end());
}

}  // namespace drift
