#include "tokenizer/vocab_loader.h"

#include <fmt/format.h>

#include <array>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "tokenizer/special_tokens.h"

namespace drift {
namespace {

constexpr std::string_view kModelKey = "tokenizer.ggml.model";
constexpr std::string_view kPreKey = "tokenizer.ggml.pre";
constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kTokenTypeKey = "tokenizer.ggml.token_type";
constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
uint32_t attr_of_token_type(int64_t type) {
  switch (type) {
    case 1:
      return kTokenAttrNormal;
    case 2:
      return kTokenAttrUnknown;
    case 3:
      return kTokenAttrControl;
    case 4:
      return kTokenAttrUserDefined;
    case 5:
      return kTokenAttrUnused;
    case 6:
      return kTokenAttrByte;
    default:
      return kTokenAttrUndefined;
  }
}

// An optional key: nullopt when absent, an error when present with another type.
Expected<std::optional<bool>> optional_bool(const GgufFile& file, std::string_view key) {
  if (!file.find(key)) return std::optional<bool>();
  DRIFT_ASSIGN_OR_RETURN(const bool value, file.get_bool(key));
  return std::optional<bool>(value);
}

Expected<std::optional<std::string_view>> optional_string(const GgufFile& file,
                                                          std::string_view key) {
  if (!file.find(key)) return std::optional<std::string_view>();
  DRIFT_ASSIGN_OR_RETURN(const std::string_view value, file.get_string(key));
  return std::optional<std::string_view>(value);
}

Status set_from(const GgufFile& file, std::string_view key, bool& flag) {
  DRIFT_ASSIGN_OR_RETURN(const auto value, optional_bool(file, key));
  if (value) flag = *value;
  return Status::Ok();
}

// An array of `count` elements of an expected kind, or an error naming the key.
Expected<const GgufArray*> array_of(const GgufFile& file, std::string_view key, uint64_t count,
                                    std::string_view kind, bool (*element_ok)(GgufType)) {
  DRIFT_ASSIGN_OR_RETURN(const GgufArray* array, file.get_array(key));
  if (!element_ok(array->element_type)) {
    return make_error("metadata '{}' is an array of {}, expected {}", key,
                      gguf_type_name(array->element_type), kind);
  }
  if (array->count != count) {
    return make_error("metadata '{}' has {} elements but the vocabulary has {} tokens", key,
                      array->count, count);
  }
  return array;
}

Status read_vocab_type(const GgufFile& file, Vocab& vocab) {
  DRIFT_ASSIGN_OR_RETURN(const std::string_view model, file.get_string(kModelKey));
  DRIFT_ASSIGN_OR_RETURN(const auto pre, optional_string(file, kPreKey));
  if (model == "llama") {
    vocab.type = VocabType::kSentencePiece;
    vocab.special.bos = 1;
    vocab.special.eos = 2;
    vocab.special.unk = 0;
    vocab.add_space_prefix = true;
    vocab.add_bos = true;
    vocab.add_eos = false;
    vocab.clean_spaces = false;
    return Status::Ok();
  }
  if (model == "gpt2") {
    vocab.type = VocabType::kByteLevelBpe;
    DRIFT_ASSIGN_OR_RETURN(vocab.pre, find_pre_tokenizer(pre.value_or("")));
    if (vocab.pre.bos_by_default) {
      vocab.special.bos = 11;
      vocab.special.eos = 11;
    } else {
      vocab.special.eos = 11;
    }
    vocab.add_space_prefix = false;
    vocab.add_bos = vocab.pre.add_bos;
    vocab.add_eos = false;
    vocab.clean_spaces = vocab.pre.clean_spaces;
    return Status::Ok();
  }
  return make_error("unsupported tokenizer model '{}' ({}): expected 'llama' or 'gpt2'", model,
                    kModelKey);
}

bool is_score_type(GgufType t) { return t == GgufType::kFloat32 || t == GgufType::kInt32; }
bool is_int32_type(GgufType t) { return t == GgufType::kInt32; }

Status read_tokens(const GgufFile& file, Vocab& vocab) {
  DRIFT_ASSIGN_OR_RETURN(const GgufArray* tokens, file.get_array(kTokensKey));
  if (tokens->element_type != GgufType::kString) {
    return make_error("metadata '{}' is an array of {}, expected strings", kTokensKey,
                      gguf_type_name(tokens->element_type));
  }
  const uint64_t n = tokens->count;
  if (n == 0) return make_error("metadata '{}' is empty: the vocabulary has no tokens", kTokensKey);
  if (n > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return make_error("metadata '{}' has {} tokens, more than token ids can address", kTokensKey,
                      n);
  }
  const GgufArray* scores = nullptr;
  if (file.find(kScoresKey)) {
    DRIFT_ASSIGN_OR_RETURN(scores,
                           array_of(file, kScoresKey, n, "float32 or int32", is_score_type));
  }
  const GgufArray* types = nullptr;
  if (file.find(kTokenTypeKey)) {
    DRIFT_ASSIGN_OR_RETURN(types, array_of(file, kTokenTypeKey, n, "int32", is_int32_type));
  }
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t attr = kTokenAttrNormal;
    if (types) {
      const int64_t type = types->int_at(i);
      if (type < 0 || type > 6) {
        return make_error("metadata '{}': token {} has type {}, expected 0..6", kTokenTypeKey, i,
                          type);
      }
      attr = attr_of_token_type(type);
    }
    const float score = scores ? static_cast<float>(scores->float_at(i)) : 0.0f;
    const std::string_view text = tokens->strings[i];
    // llama.cpp names empty tokens so that they stay distinct and visible.
    if (text.empty()) {
      vocab.add_token(fmt::format("[EMPTY_{}]", i), score, attr);
    } else {
      vocab.add_token(text, score, attr);
    }
  }
  return Status::Ok();
}

// Each merge is "left right": split at the first space after the first byte, so that a left part
// may itself be a space.
Status read_merges(const GgufFile& file, Vocab& vocab) {
  if (!file.find(kMergesKey)) {
    return make_error("missing metadata key '{}': byte-level BPE needs its merges", kMergesKey);
  }
  DRIFT_ASSIGN_OR_RETURN(const GgufArray* merges, file.get_array(kMergesKey));
  if (merges->element_type != GgufType::kString) {
    return make_error("metadata '{}' is an array of {}, expected strings", kMergesKey,
                      gguf_type_name(merges->element_type));
  }
  for (uint64_t i = 0; i < merges->count; ++i) {
    const std::string_view merge = merges->strings[i];
    const size_t space = merge.size() > 1 ? merge.find(' ', 1) : std::string_view::npos;
    if (space == std::string_view::npos || space + 1 == merge.size()) {
      return make_error("metadata '{}': merge {} ('{}') is not two parts separated by a space",
                        kMergesKey, i, merge);
    }
    vocab.add_merge(merge.substr(0, space), merge.substr(space + 1));
  }
  return Status::Ok();
}

struct SpecialIdKey {
  std::string_view key;
  std::optional<int32_t> SpecialTokenIds::*slot;
};

// In llama.cpp's order: the deprecated prefix/suffix/middle keys come last and win.
constexpr std::array<SpecialIdKey, 17> kSpecialIdKeys = {{
    {"tokenizer.ggml.bos_token_id", &SpecialTokenIds::bos},
    {"tokenizer.ggml.eos_token_id", &SpecialTokenIds::eos},
    {"tokenizer.ggml.eot_token_id", &SpecialTokenIds::eot},
    {"tokenizer.ggml.eom_token_id", &SpecialTokenIds::eom},
    {"tokenizer.ggml.unknown_token_id", &SpecialTokenIds::unk},
    {"tokenizer.ggml.seperator_token_id", &SpecialTokenIds::sep},
    {"tokenizer.ggml.padding_token_id", &SpecialTokenIds::pad},
    {"tokenizer.ggml.mask_token_id", &SpecialTokenIds::mask},
    {"tokenizer.ggml.fim_pre_token_id", &SpecialTokenIds::fim_pre},
    {"tokenizer.ggml.fim_suf_token_id", &SpecialTokenIds::fim_suf},
    {"tokenizer.ggml.fim_mid_token_id", &SpecialTokenIds::fim_mid},
    {"tokenizer.ggml.fim_pad_token_id", &SpecialTokenIds::fim_pad},
    {"tokenizer.ggml.fim_rep_token_id", &SpecialTokenIds::fim_rep},
    {"tokenizer.ggml.fim_sep_token_id", &SpecialTokenIds::fim_sep},
    {"tokenizer.ggml.prefix_token_id", &SpecialTokenIds::fim_pre},
    {"tokenizer.ggml.suffix_token_id", &SpecialTokenIds::fim_suf},
    {"tokenizer.ggml.middle_token_id", &SpecialTokenIds::fim_mid},
}};

Status read_special_ids(const GgufFile& file, Vocab& vocab) {
  // A built-in default that this vocabulary is too small for is dropped, as llama.cpp does; an id
  // the file names must exist.
  for (const SpecialIdKey& k : kSpecialIdKeys) {
    std::optional<int32_t>& slot = vocab.special.*k.slot;
    if (slot && !vocab.contains(*slot)) slot.reset();
  }
  for (const SpecialIdKey& k : kSpecialIdKeys) {
    if (!file.find(k.key)) continue;
    DRIFT_ASSIGN_OR_RETURN(const uint64_t id, file.get_uint(k.key));
    if (id >= static_cast<uint64_t>(vocab.size())) {
      return make_error("metadata '{}' is {}, outside the vocabulary of {} tokens", k.key, id,
                        vocab.size());
    }
    vocab.special.*k.slot = static_cast<int32_t>(id);
  }
  return Status::Ok();
}

Status check_added_tokens_exist(const Vocab& vocab) {
  if (vocab.add_bos && !vocab.special.bos) {
    return make_error("tokenizer.ggml.add_bos_token is set but the vocabulary has no BOS token");
  }
  if (vocab.add_eos && !vocab.special.eos) {
    return make_error("tokenizer.ggml.add_eos_token is set but the vocabulary has no EOS token");
  }
  return Status::Ok();
}

}  // namespace

Status load_vocab(const GgufFile& file, Vocab& vocab) {
  DRIFT_RETURN_IF_ERROR(read_vocab_type(file, vocab));
  DRIFT_RETURN_IF_ERROR(set_from(file, "tokenizer.ggml.add_space_prefix", vocab.add_space_prefix));
  DRIFT_RETURN_IF_ERROR(read_tokens(file, vocab));
  if (vocab.type == VocabType::kByteLevelBpe) DRIFT_RETURN_IF_ERROR(read_merges(file, vocab));
  DRIFT_RETURN_IF_ERROR(vocab.index());
  DRIFT_RETURN_IF_ERROR(read_special_ids(file, vocab));
  DRIFT_RETURN_IF_ERROR(set_from(file, "tokenizer.ggml.add_bos_token", vocab.add_bos));
  DRIFT_RETURN_IF_ERROR(set_from(file, "tokenizer.ggml.add_eos_token", vocab.add_eos));
  apply_special_token_rules(vocab);
  DRIFT_RETURN_IF_ERROR(check_added_tokens_exist(vocab));
  vocab.build_pieces();
  vocab.build_special_tokens();
  return Status::Ok();
}

}  // namespace drift
