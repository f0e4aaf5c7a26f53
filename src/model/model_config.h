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
  kLlama,   // SmolLM2, Llama 2/3, Mistral
  kQwen2,   // llama with biases on the q, k and v projections
  kGemma3,  // sliding-window layers, QK-norm, extra pre/post norms, GELU, scaled embeddings
  kQwen3,   // qwen2 without the q/k/v biases, with an RMSNorm over each q and k head
};

// Which dimensions RoPE rotates together.
enum class RopeLayout {
  kAdjacent,  // (2i, 2i+1): ggml's "normal" mode, used for the llama architecture
  kHalves,    // (i, i + d/2): ggml's NEOX mode, used for qwen2 and gemma3
};

enum class Activation { kSilu, kGeluTanh };

struct LayerConfig {
  bool sliding_window = false;  // attends only to the last `sliding_window` positions
  float rope_base = 10000.0f;
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
  RopeLayout rope_layout = RopeLayout::kAdjacent;
  int64_t sliding_window = 0;  // 0: every layer attends to the whole context
  std::vector<LayerConfig> layers;

  float embedding_scale = 1.0f;      // token embeddings are multiplied by this
  float attention_scale = 0.0f;      // q is multiplied by this before q.k
  float final_logit_softcap = 0.0f;  // 0: none; else logits = cap * tanh(logits / cap)
  Activation activation = Activation::kSilu;
  bool qk_norm = false;     // RMSNorm over each q and k head (gemma3, qwen3)
  bool post_norms = false;  // RMSNorm after attention and after the FFN (gemma3)
  bool qkv_bias = false;    // qwen2

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
  int64_t v_dim() const { return n_kv_heads * head_dim_v; }
};

// Reads and validates the configuration; an unsupported architecture or an inconsistent or
// implausible value is an error naming the key.
Expected<ModelConfig> load_model_config(const GgufFile& file);

std::string_view architecture_name(Architecture arch);

}  // namespace drift
