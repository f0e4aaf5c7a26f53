// The model's tensors, bound to views of the memory-mapped GGUF file and checked against the
// configuration's shapes. Matrices stay in their file format; the small vectors (norm weights and
// biases) are converted to fp32 once at load.
#pragma once

#include <memory>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/format.h"
#include "kernels/matmul.h"
#include "kernels/panel.h"
#include "model/model_config.h"
#include "util/cpu_features.h"
#include "util/error.h"
#include "util/huge_pages.h"

namespace drift {

// A weight matrix W [rows][cols] in its file format: row r (one output feature) is `cols`
// contiguous elements, row_bytes apart. Multiplying by x computes W x.
struct WeightMatrix {
  kernels::Format format = kernels::Format::kF32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_bytes = 0;
  kernels::MatmulFn matmul = nullptr;  // for the ISA the weights were bound with
  // The same matrix repacked into 16-row panels (kernels/panel.h) when its format has a panel
  // layout; matmuls then use panel_matmul instead of matmul. Owned by ModelWeights.
  const uint8_t* panels = nullptr;
  kernels::PanelMatmulFn panel_matmul = nullptr;
  bool has_panels() const { return panels != nullptr; }
};

// A vector of fp32 values [size] (norm weights, biases), owned by ModelWeights.
struct WeightVector {
  const float* data = nullptr;
  int64_t size = 0;
  bool present() const { return data != nullptr; }
};

struct LayerWeights {
  WeightVector attn_norm;       // [n_embd]
  WeightMatrix wq;              // [q_dim][n_embd]
  WeightMatrix wk;              // [kv_dim][n_embd]
  WeightMatrix wv;              // [v_dim][n_embd]
  WeightVector bq, bk, bv;      // qwen2: [q_dim], [kv_dim], [v_dim]
  WeightVector q_norm, k_norm;  // gemma3: [head_dim]
  WeightMatrix wo;              // [n_embd][n_heads * head_dim_v]
  WeightVector bo;              // gpt-oss: [n_embd]
  WeightVector attn_sinks;      // gpt-oss: [n_heads] each query head's sink logit
  WeightVector attn_post_norm;  // gemma3: [n_embd]
  WeightVector ffn_norm;        // [n_embd]
  WeightMatrix ffn_gate;        // [n_ff][n_embd]
  WeightMatrix ffn_up;          // [n_ff][n_embd]
  WeightMatrix ffn_down;        // [n_embd][n_ff]
  WeightVector ffn_post_norm;   // gemma3: [n_embd]
  // Mixture of experts (config.moe()), instead of ffn_gate/up/down: the router and, per expert,
  // a view of its slice of the file's [n_expert][rows][cols] tensor.
  WeightMatrix ffn_gate_inp;                // [n_expert][n_embd] router
  std::vector<WeightMatrix> ffn_gate_exps;  // [n_expert] of [n_ff_exp][n_embd]
  std::vector<WeightMatrix> ffn_up_exps;    // [n_expert] of [n_ff_exp][n_embd]
  std::vector<WeightMatrix> ffn_down_exps;  // [n_expert] of [n_embd][n_ff_exp]
  // gpt-oss's biases (absent elsewhere): the router's, added to its logits before routing, and
  // each expert's, added to its gate, up and down outputs (llama.cpp's ggml_add_id).
  WeightVector ffn_gate_inp_b;   // [n_expert]
  WeightVector ffn_gate_exps_b;  // [n_expert][n_ff_exp]
  WeightVector ffn_up_exps_b;    // [n_expert][n_ff_exp]
  WeightVector ffn_down_exps_b;  // [n_expert][n_embd]
};

// Every matrix of a layer that a forward pass multiplies (the dense or the expert feed-forward).
std::vector<const WeightMatrix*> layer_matrices(const LayerWeights& l);

struct ModelWeights {
  WeightMatrix token_embd;   // [n_vocab][n_embd]; rows are looked up, not multiplied
  WeightVector output_norm;  // [n_embd]
  // [rope_dims / 2] per-dimension RoPE frequency divisors (Llama 3.1+ "rope_freqs", shared by
  // every layer, as llama.cpp applies them); absent for most models.
  WeightVector rope_freqs;
  WeightMatrix output;  // [n_vocab][n_embd]; token_embd itself when the output is tied
  std::vector<LayerWeights> layers;
  std::vector<std::unique_ptr<float[]>> owned_vectors;  // storage behind the WeightVectors
  HugePageArena panel_memory;                           // storage behind WeightMatrix::panels
  // Bytes of the matrices one token reads (output counted once; of a mixture of experts, the
  // router and n_expert_used experts per layer).
  uint64_t matrix_bytes = 0;
};

// Binds every tensor the architecture needs; a missing tensor, a shape that disagrees with the
// configuration or a format drift has no kernel for is an error naming the tensor. Matrices that
// are multiplied (not token_embd, unless it is also the output) and whose format has a panel
// layout are repacked into panels at load.
Expected<ModelWeights> bind_model_weights(const GgufFile& file, const ModelConfig& config, Isa isa);

}  // namespace drift
