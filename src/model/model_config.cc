#include "model/model_config.h"

#include <cmath>

#include "kernels/rope.h"

namespace drift {
namespace {

// Bounds on geometry: far above any model drift can run on a CPU, low enough that products of
// them cannot overflow the sizes of buffers computed from them.
constexpr uint64_t kMaxLayers = 512;
constexpr uint64_t kMaxWidth = 1 << 17;  // n_embd, n_ff, q/kv dims
constexpr uint64_t kMaxHeads = 1024;
constexpr uint64_t kMaxVocab = 1 << 22;
constexpr uint64_t kMaxContext = 1 << 24;
constexpr uint64_t kMaxExperts = 1024;  // llama.cpp's LLAMA_MAX_EXPERTS

class Reader {
 public:
  Reader(const GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

  std::string key(std::string_view suffix) const { return arch_ + "." + std::string(suffix); }

  Expected<int64_t> uint_in(std::string_view suffix, uint64_t lo, uint64_t hi) const {
    std::string k = key(suffix);
    DRIFT_ASSIGN_OR_RETURN(uint64_t v, file_.get_uint(k));
    if (v < lo || v > hi) return make_error("metadata '{}' is {}, expected {} to {}", k, v, lo, hi);
    return static_cast<int64_t>(v);
  }

  Expected<int64_t> uint_or(std::string_view suffix, uint64_t lo, uint64_t hi,
                            int64_t fallback) const {
    if (file_.find(key(suffix)) == nullptr) return fallback;
    return uint_in(suffix, lo, hi);
  }

  Expected<float> positive_float_or(std::string_view suffix, float fallback) const {
    std::string k = key(suffix);
    if (file_.find(k) == nullptr) return fallback;
    DRIFT_ASSIGN_OR_RETURN(double v, file_.get_float(k));
    if (!std::isfinite(v) || v <= 0) return make_error("metadata '{}' is {}, expected > 0", k, v);
    return static_cast<float>(v);
  }

 private:
  const GgufFile& file_;
  std::string arch_;
};

Expected<Architecture> parse_architecture(std::string_view name) {
  if (name == "llama") return Architecture::kLlama;
  if (name == "qwen2") return Architecture::kQwen2;
  if (name == "gemma3") return Architecture::kGemma3;
  if (name == "qwen3") return Architecture::kQwen3;
  if (name == "qwen3moe") return Architecture::kQwen3Moe;
  if (name == "gpt-oss") return Architecture::kGptOss;
  return make_error(
      "unsupported architecture '{}' (drift runs llama, qwen2, qwen3, qwen3moe, gemma3 and "
      "gpt-oss)",
      name);
}

// The vocabulary size: the arch's vocab_size key if present, else the token list's length.
Expected<int64_t> read_vocab_size(const GgufFile& file, const Reader& r) {
  if (file.find(r.key("vocab_size")) != nullptr) return r.uint_in("vocab_size", 1, kMaxVocab);
  DRIFT_ASSIGN_OR_RETURN(const GgufArray* tokens, file.get_array("tokenizer.ggml.tokens"));
  if (tokens->count == 0 || tokens->count > kMaxVocab)
    return make_error("tokenizer.ggml.tokens has {} entries, expected 1 to {}", tokens->count,
                      kMaxVocab);
  return static_cast<int64_t>(tokens->count);
}

Status apply_gemma3(const Reader& r, ModelConfig& c) {
  c.rope_layout = RopeLayout::kHalves;
  c.activation = Activation::kGeluTanh;
  c.qk_norm = true;
  c.post_norms = true;
  c.embedding_scale = std::sqrt(static_cast<float>(c.n_embd));
  // As llama.cpp (after gemma_pytorch): q is scaled by 1/sqrt(head_dim), except for the 27B
  // model (62 layers) which uses 1/sqrt(n_embd / n_heads).
  c.attention_scale = c.n_layers == 62 ? 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_heads))
                                       : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  DRIFT_ASSIGN_OR_RETURN(c.sliding_window,
                         r.uint_or("attention.sliding_window", 0, kMaxContext, 0));
  DRIFT_ASSIGN_OR_RETURN(c.final_logit_softcap, r.positive_float_or("final_logit_softcapping", 0));
  // llama.cpp hard-codes these two Gemma 3 constants when the metadata does not carry them: every
  // 6th layer is global (the rest use the sliding window), and local layers use RoPE base 10000.
  DRIFT_ASSIGN_OR_RETURN(int64_t pattern,
                         r.uint_or("attention.sliding_window_pattern", 1, kMaxLayers, 6));
  DRIFT_ASSIGN_OR_RETURN(float local_base, r.positive_float_or("rope.freq_base_swa", 10000.0f));
  if (c.sliding_window > 0) {
    for (int64_t il = 0; il < c.n_layers; ++il) {
      bool local = il % pattern < pattern - 1;
      c.layers[il].sliding_window = local;
      if (local) c.layers[il].rope_base = local_base;
    }
  }
  return Status::Ok();
}

// YaRN as llama.cpp's context setup computes it (llama-context.cpp, in float): freq_scale =
// 1 / factor, ext_factor 1, attn_factor = mscale(factor) / (1 + 0.1 ln factor) times
// rope.scaling.attn_factor (the kernel multiplies the 1 + 0.1 ln factor back), correction ranges
// for beta_fast 32 and beta_slow 1 over rope.scaling.original_context_length.
Status read_yarn(const Reader& r, ModelConfig& c) {
  DRIFT_ASSIGN_OR_RETURN(float scaling_factor, r.positive_float_or("rope.scaling.factor", 1.0f));
  DRIFT_ASSIGN_OR_RETURN(c.rope_n_ctx_orig, r.uint_or("rope.scaling.original_context_length", 1,
                                                      kMaxContext, c.n_ctx_train));
  DRIFT_ASSIGN_OR_RETURN(float attn, r.positive_float_or("rope.scaling.attn_factor", 1.0f));
  c.rope_freq_scale = 1.0f / scaling_factor;
  c.rope_ext_factor = 1.0f;
  const float factor = 1.0f / c.rope_freq_scale;
  const float mscale = factor <= 1.0f ? 1.0f : 0.1f * std::log(factor) + 1.0f;
  c.rope_attn_factor = mscale * (1.0f / (1.0f + 0.1f * std::log(factor))) * attn;
  return Status::Ok();
}

// The expert counts and width of a mixture-of-experts architecture; an expert count without the
// other keys, or k above the expert count, is an error naming the key.
Status read_experts(const Reader& r, ModelConfig& c) {
  DRIFT_ASSIGN_OR_RETURN(c.n_expert, r.uint_in("expert_count", 1, kMaxExperts));
  DRIFT_ASSIGN_OR_RETURN(c.n_expert_used, r.uint_in("expert_used_count", 1, kMaxExperts));
  if (c.n_expert_used > c.n_expert)
    return make_error("metadata '{}' is {}, more than the {} experts of '{}'",
                      r.key("expert_used_count"), c.n_expert_used, c.n_expert,
                      r.key("expert_count"));
  // As llama.cpp: without the key, an expert is n_ff / n_expert_used wide.
  DRIFT_ASSIGN_OR_RETURN(
      c.n_ff_exp, r.uint_or("expert_feed_forward_length", 1, kMaxWidth, c.n_ff / c.n_expert_used));
  if (c.n_ff_exp < 1)
    return make_error("metadata '{}' is missing and {} / {} leaves no expert width",
                      r.key("expert_feed_forward_length"), c.n_ff, c.n_expert_used);
  return Status::Ok();
}

// gpt-oss as llama.cpp's openai-moe graph: NEOX RoPE, q/k/v and output biases, a sink logit per
// head, attention.sliding_window on the layers il % pattern < pattern - 1 (pattern 2 unless the
// file says otherwise: every other layer, the first one sliding), the experts routed top k then
// softmax, no renormalisation, swiglu_oai.
Status apply_gpt_oss(const Reader& r, ModelConfig& c) {
  c.rope_layout = RopeLayout::kHalves;
  c.qkv_bias = true;
  c.wo_bias = true;
  c.attn_sinks = true;
  DRIFT_ASSIGN_OR_RETURN(c.sliding_window, r.uint_in("attention.sliding_window", 1, kMaxContext));
  DRIFT_ASSIGN_OR_RETURN(int64_t pattern,
                         r.uint_or("attention.sliding_window_pattern", 1, kMaxLayers, 2));
  DRIFT_ASSIGN_OR_RETURN(float swa_base,
                         r.positive_float_or("rope.freq_base_swa", c.layers[0].rope_base));
  for (int64_t il = 0; il < c.n_layers; ++il) {
    c.layers[il].sliding_window = il % pattern < pattern - 1;
    if (c.layers[il].sliding_window) c.layers[il].rope_base = swa_base;
  }
  DRIFT_RETURN_IF_ERROR(read_experts(r, c));
  c.expert_gating = ExpertGating::kTopKThenSoftmax;
  c.expert_weights_norm = false;
  c.activation = Activation::kSwigluOai;
  return Status::Ok();
}

}  // namespace

std::string_view architecture_name(Architecture arch) {
  switch (arch) {
    case Architecture::kLlama:
      return "llama";
    case Architecture::kQwen2:
      return "qwen2";
    case Architecture::kGemma3:
      return "gemma3";
    case Architecture::kQwen3:
      return "qwen3";
    case Architecture::kQwen3Moe:
      return "qwen3moe";
    case Architecture::kGptOss:
      return "gpt-oss";
  }
  return "unknown";
}

Expected<ModelConfig> load_model_config(const GgufFile& file) {
  ModelConfig c;
  DRIFT_ASSIGN_OR_RETURN(std::string_view arch, file.get_string("general.architecture"));
  c.arch_name = std::string(arch);
  DRIFT_ASSIGN_OR_RETURN(c.arch, parse_architecture(arch));
  if (auto name = file.get_string("general.name"); name.ok()) c.name = std::string(*name);
  Reader r(file, c.arch_name);

  DRIFT_ASSIGN_OR_RETURN(c.n_layers, r.uint_in("block_count", 1, kMaxLayers));
  DRIFT_ASSIGN_OR_RETURN(c.n_embd, r.uint_in("embedding_length", 1, kMaxWidth));
  DRIFT_ASSIGN_OR_RETURN(c.n_ff, r.uint_in("feed_forward_length", 1, kMaxWidth));
  DRIFT_ASSIGN_OR_RETURN(c.n_heads, r.uint_in("attention.head_count", 1, kMaxHeads));
  DRIFT_ASSIGN_OR_RETURN(c.n_kv_heads,
                         r.uint_or("attention.head_count_kv", 1, kMaxHeads, c.n_heads));
  if (c.n_heads % c.n_kv_heads != 0)
    return make_error("attention.head_count {} is not a multiple of attention.head_count_kv {}",
                      c.n_heads, c.n_kv_heads);
  DRIFT_ASSIGN_OR_RETURN(c.head_dim, r.uint_or("attention.key_length", 1, kMaxWidth, 0));
  if (c.head_dim == 0) {  // not in the file: the heads split the embedding evenly
    if (c.n_embd % c.n_heads != 0)
      return make_error("embedding_length {} is not a multiple of attention.head_count {}",
                        c.n_embd, c.n_heads);
    c.head_dim = c.n_embd / c.n_heads;
  }
  DRIFT_ASSIGN_OR_RETURN(c.head_dim_v,
                         r.uint_or("attention.value_length", 1, kMaxWidth, c.head_dim));
  if (c.head_dim % 2 != 0)
    return make_error("head dimension {} is odd; RoPE needs pairs", c.head_dim);
  if (c.q_dim() > static_cast<int64_t>(kMaxWidth))
    return make_error("query width {} x {} is implausibly large", c.n_heads, c.head_dim);
  DRIFT_ASSIGN_OR_RETURN(c.n_vocab, read_vocab_size(file, r));
  DRIFT_ASSIGN_OR_RETURN(c.n_ctx_train, r.uint_in("context_length", 1, kMaxContext));
  DRIFT_ASSIGN_OR_RETURN(c.rope_dims, r.uint_or("rope.dimension_count", 2, kMaxWidth, c.head_dim));
  if (c.rope_dims > c.head_dim || c.rope_dims % 2 != 0)
    return make_error("rope.dimension_count {} must be even and at most the head dimension {}",
                      c.rope_dims, c.head_dim);

  DRIFT_ASSIGN_OR_RETURN(c.rms_eps, r.positive_float_or("attention.layer_norm_rms_epsilon", 1e-5f));
  DRIFT_ASSIGN_OR_RETURN(float rope_base, r.positive_float_or("rope.freq_base", 10000.0f));
  if (file.find(r.key("rope.scaling.type")) != nullptr) {
    DRIFT_ASSIGN_OR_RETURN(std::string_view scaling, file.get_string(r.key("rope.scaling.type")));
    if (scaling == "linear") {
      DRIFT_ASSIGN_OR_RETURN(float factor, r.positive_float_or("rope.scaling.factor", 1.0f));
      c.rope_freq_scale = 1.0f / factor;
    } else if (scaling == "yarn") {
      DRIFT_RETURN_IF_ERROR(read_yarn(r, c));
    } else if (scaling != "none") {
      return make_error("RoPE scaling '{}' is not supported yet", scaling);
    }
  }
  c.layers.assign(c.n_layers, LayerConfig{false, rope_base});
  c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  switch (c.arch) {
    case Architecture::kLlama:
      c.rope_layout = RopeLayout::kAdjacent;
      break;
    case Architecture::kQwen2:
      c.rope_layout = RopeLayout::kHalves;
      c.qkv_bias = true;
      break;
    case Architecture::kGemma3:
      DRIFT_RETURN_IF_ERROR(apply_gemma3(r, c));
      break;
    case Architecture::kQwen3:
      // As llama.cpp's qwen3 graph: NEOX RoPE, q and k heads RMS-normed (eps as the layer norms)
      // before RoPE, no biases.
      c.rope_layout = RopeLayout::kHalves;
      c.qk_norm = true;
      break;
    case Architecture::kQwen3Moe:
      // qwen3's attention; the feed-forward is llama.cpp's build_moe_ffn with softmax gating
      // and the top k weights renormalised to sum to 1.
      c.rope_layout = RopeLayout::kHalves;
      c.qk_norm = true;
      DRIFT_RETURN_IF_ERROR(read_experts(r, c));
      c.expert_gating = ExpertGating::kSoftmaxThenTopK;
      c.expert_weights_norm = true;
      break;
    case Architecture::kGptOss:
      DRIFT_RETURN_IF_ERROR(apply_gpt_oss(r, c));
      break;
  }
  if (c.rope_ext_factor != 0.0f)
    for (LayerConfig& layer : c.layers)
      kernels::rope_yarn_corr_dims(c.rope_dims, c.rope_n_ctx_orig, layer.rope_base, 32.0f, 1.0f,
                                   layer.rope_corr_dims);
  return c;
}

}  // namespace drift
