// The hyper-parameters of a model, read from GGUF metadata and validated before anything is
// sized from them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "util/error.h"

namespace drift {

enum class Architecture {
  kLlama,     // SmolLM2, Llama 2/3, Mistral
  kQwen2,     // llama with biases on the q, k and v projections
  kGemma3,    // sliding-window layers, QK-norm, extra pre/post norms, GELU, scaled embeddings
  kQwen3,     // qwen2 without the q/k/v biases, with an RMSNorm over each q and k head
  kQwen3Moe,  // qwen3 with a mixture-of-experts feed-forward in every layer
  kGptOss,    // OpenAI's gpt-oss: biased attention with sinks, alternating sliding-window layers,
              // biased experts (MXFP4) with top-k-then-softmax routing and a clamped SwiGLU
};

// Which dimensions RoPE rotates together.
enum class RopeLayout {
  kAdjacent,  // (2i, 2i+1): ggml's "normal" mode, used for the llama architecture
  kHalves,    // (i, i + d/2): ggml's NEOX mode, used for qwen2 and gemma3
};

enum class Activation {
  kSilu,      // silu(gate) * up
  kGeluTanh,  // gelu(gate) * up
  kSwigluOai  // gpt-oss's experts: swiglu_oai(gate, up) with alpha 1.702, limit 7 (llama.cpp's)
};

// How a mixture-of-experts layer turns its router's logits into expert weights (llama.cpp's
// build_moe_ffn gating functions).
enum class ExpertGating {
  kSoftmaxThenTopK,  // softmax over every expert, keep the top k probabilities (qwen3moe)
  kTopKThenSoftmax,  // keep the top k logits, softmax over those k (gpt-oss)
};

struct LayerConfig {
  bool sliding_window = false;  // attends only to the last `sliding_window` positions
  float rope_base = 10000.0f;
  float rope_corr_dims[2] = {0, 0};  // YaRN's correction range for this layer's base
};

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string arch_name;  // general.architecture
  std::string name;       // general.name

  int64_t n_layers = 0;
  int64_t n_embd = 0;      // residual stream width
  int64_t n_ff = 0;        // feed-forward hidden width
  int64_t n_heads = 0;     // query heads
  int64_t n_kv_heads = 0;  // key/value heads (grouped-query attention)
  int64_t head_dim = 0;    // per-head width of q and k
  int64_t head_dim_v = 0;  // per-head width of v
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;  // context length the model was trained with
  int64_t rope_dims = 0;    // leading dimensions of each head that RoPE rotates

  float rms_eps = 1e-5f;
  float rope_freq_scale = 1.0f;  // positions are multiplied by this (linear RoPE scaling)
  // YaRN RoPE scaling (rope.scaling.type "yarn"), as llama.cpp applies it: ext_factor 1, the
  // cos/sin magnitude attn_factor (kernels/rope.h), correction ranges from the original context.
  float rope_ext_factor = 0.0f;
  float rope_attn_factor = 1.0f;
  int64_t rope_n_ctx_orig = 0;
  RopeLayout rope_layout = RopeLayout::kAdjacent;
  int64_t sliding_window = 0;  // 0: every layer attends to the whole context
  std::vector<LayerConfig> layers;

  float embedding_scale = 1.0f;      // token embeddings are multiplied by this
  float attention_scale = 0.0f;      // q is multiplied by this before q.k
  float final_logit_softcap = 0.0f;  // 0: none; else logits = cap * tanh(logits / cap)
  Activation activation = Activation::kSilu;
  bool qk_norm = false;     // RMSNorm over each q and k head (gemma3, qwen3)
  bool post_norms = false;  // RMSNorm after attention and after the FFN (gemma3)
  bool qkv_bias = false;    // qwen2; gpt-oss
  bool wo_bias = false;     // gpt-oss: a bias on the attention output projection
  bool attn_sinks = false;  // gpt-oss: a learned sink logit per query head (paged_attention.h)

  // Mixture of experts (0 experts: a dense feed-forward of width n_ff).
  int64_t n_expert = 0;       // experts per layer
  int64_t n_expert_used = 0;  // experts each token is routed to (top k)
  int64_t n_ff_exp = 0;       // hidden width of one expert
  ExpertGating expert_gating = ExpertGating::kSoftmaxThenTopK;
  bool expert_weights_norm = false;  // the k weights are divided by their sum (qwen3moe)
  // swiglu_oai's constants (Activation::kSwigluOai), as llama.cpp's build_moe_ffn fixes them.
  float swiglu_alpha = 1.702f;
  float swiglu_limit = 7.0f;

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
  int64_t v_dim() const { return n_kv_heads * head_dim_v; }
  bool moe() const { return n_expert > 0; }
  // Hidden width of the dense feed-forward (0 when the layers are experts).
  int64_t dense_ff() const { return moe() ? 0 : n_ff; }
};

// Reads and validates the configuration; an unsupported architecture or an inconsistent or
// implausible value is an error naming the key.
Expected<ModelConfig> load_model_config(const GgufFile& file);

std::string_view architecture_name(Architecture arch);

}  // namespace drift
