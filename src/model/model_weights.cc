#include "model/model_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <new>
#include <thread>
#include <type_traits>
#include <vector>

#include "kernels/dequantize.h"

namespace drift {
namespace {

// Repacks on every core: the output matrix of a large vocabulary alone is ~100 MB of bytes to
// permute, which would otherwise add a second to every start.
void repack_in_parallel(const WeightMatrix& m, uint8_t* out) {
  const int64_t panels = (m.rows + kernels::kPanelRows - 1) / kernels::kPanelRows;
  const int64_t threads =
      std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::min<int64_t>(panels, 16));
  if (threads == 1 || panels < 64) {
    kernels::repack_panels(m.format, m.data, m.row_bytes, m.rows, m.cols, out);
    return;
  }
  std::vector<std::thread> workers;
  for (int64_t i = 0; i < threads; ++i)
    workers.emplace_back([&m, out, panels, threads, i] {
      kernels::repack_panels(m.format, m.data, m.row_bytes, m.rows, m.cols, out,
                             panels * i / threads, panels * (i + 1) / threads);
    });
  for (std::thread& t : workers) t.join();
}

class Binder {
 public:
  Binder(const GgufFile& file, Isa isa, ModelWeights& weights)
      : file_(file), isa_(isa), kernels_(kernels::matmul_kernels(isa)), weights_(weights) {}

  // Repacks a multiplied matrix into panels when its format has a panel layout (the same decision
  // on every ISA, so results do not depend on the CPU).
  void add_panels(WeightMatrix& m) {
    if (!kernels::panel_supported(m.format)) return;
    const int64_t bytes = kernels::panel_matrix_bytes(m.format, m.rows, m.cols);
    // On huge pages: a decode step streams every panel once, ~100 MB and more per token.
    uint8_t* panels = weights_.panel_memory.allocate(static_cast<size_t>(bytes));
    if (panels == nullptr) throw std::bad_alloc();
    repack_in_parallel(m, panels);
    m.panels = panels;
    m.panel_matmul = kernels::panel_matmul(isa_, m.format);
  }

  // A 2-D tensor whose GGUF shape is [cols, rows] (ne[0] is the contiguous dimension).
  Expected<WeightMatrix> matrix(const std::string& name, int64_t rows, int64_t cols) {
    DRIFT_ASSIGN_OR_RETURN(const GgufTensor* t, find(name));
    if (t->n_dims > 2 || static_cast<int64_t>(t->ne[0]) != cols ||
        static_cast<int64_t>(t->ne[1]) != rows)
      return make_error("tensor '{}' has shape [{}, {}], expected [{}, {}]", name, t->ne[0],
                        t->ne[1], cols, rows);
    auto format = kernels::weight_format_for(static_cast<uint32_t>(t->type), cols);
    if (!format.ok()) return make_error("tensor '{}': {}", name, format.error().message);
    WeightMatrix m;
    m.format = *format;
    m.data = t->data;
    m.rows = rows;
    m.cols = cols;
    m.row_bytes = kernels::row_bytes(*format, cols);
    m.matmul = kernels_.matmul(*format);
    return m;
  }

  // A 3-D tensor of GGUF shape [cols, rows, n_expert]: one matrix per expert, each a view of its
  // contiguous slice.
  Expected<std::vector<WeightMatrix>> expert_matrices(const std::string& name, int64_t n_expert,
                                                      int64_t rows, int64_t cols) {
    DRIFT_ASSIGN_OR_RETURN(const GgufTensor* t, find(name));
    if (t->n_dims != 3 || static_cast<int64_t>(t->ne[0]) != cols ||
        static_cast<int64_t>(t->ne[1]) != rows || static_cast<int64_t>(t->ne[2]) != n_expert)
      return make_error("tensor '{}' has shape [{}, {}, {}], expected [{}, {}, {}]", name, t->ne[0],
                        t->ne[1], t->ne[2], cols, rows, n_expert);
    auto format = kernels::weight_format_for(static_cast<uint32_t>(t->type), cols);
    if (!format.ok()) return make_error("tensor '{}': {}", name, format.error().message);
    std::vector<WeightMatrix> experts(n_expert);
    const int64_t row_bytes = kernels::row_bytes(*format, cols);
    for (int64_t e = 0; e < n_expert; ++e) {
      WeightMatrix& m = experts[e];
      m.format = *format;
      m.data = t->data + e * rows * row_bytes;  // within the tensor: the reader checked its size
      m.rows = rows;
      m.cols = cols;
      m.row_bytes = row_bytes;
      m.matmul = kernels_.matmul(*format);
    }
    return experts;
  }

  Expected<WeightVector> vector(const std::string& name, int64_t size) {
    DRIFT_ASSIGN_OR_RETURN(const GgufTensor* t, find(name));
    if (t->n_dims != 1 || static_cast<int64_t>(t->ne[0]) != size)
      return make_error("tensor '{}' has {} elements in {} dimensions, expected a vector of {}",
                        name, t->n_elements, t->n_dims, size);
    const kernels::FormatInfo* info = kernels::find_format(static_cast<uint32_t>(t->type));
    if (info == nullptr || size % info->block_size != 0)
      return make_error("tensor '{}' has a format drift cannot read", name);
    auto storage = std::make_unique<float[]>(size);
    kernels::dequantize_row(info->format, t->data, storage.get(), size);
    WeightVector v{storage.get(), size};
    weights_.owned_vectors.push_back(std::move(storage));
    return v;
  }

  // One vector per expert from a 2-D tensor of GGUF shape [size, n_expert] (gpt-oss's expert
  // biases), as fp32 [n_expert][size].
  Expected<WeightVector> expert_vectors(const std::string& name, int64_t n_expert, int64_t size) {
    DRIFT_ASSIGN_OR_RETURN(const GgufTensor* t, find(name));
    if (t->n_dims != 2 || static_cast<int64_t>(t->ne[0]) != size ||
        static_cast<int64_t>(t->ne[1]) != n_expert)
      return make_error("tensor '{}' has shape [{}, {}], expected [{}, {}]", name, t->ne[0],
                        t->ne[1], size, n_expert);
    const kernels::FormatInfo* info = kernels::find_format(static_cast<uint32_t>(t->type));
    if (info == nullptr || size % info->block_size != 0)
      return make_error("tensor '{}' has a format drift cannot read", name);
    auto storage = std::make_unique<float[]>(n_expert * size);
    const int64_t row_bytes = kernels::row_bytes(info->format, size);
    for (int64_t e = 0; e < n_expert; ++e)
      kernels::dequantize_row(info->format, t->data + e * row_bytes, storage.get() + e * size,
                              size);
    WeightVector v{storage.get(), n_expert * size};
    weights_.owned_vectors.push_back(std::move(storage));
    return v;
  }

  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

 private:
  Expected<const GgufTensor*> find(const std::string& name) const {
    const GgufTensor* t = file_.find_tensor(name);
    if (t == nullptr) return make_error("the model file has no tensor '{}'", name);
    return t;
  }

  const GgufFile& file_;
  const Isa isa_;
  const kernels::MatmulKernels& kernels_;
  ModelWeights& weights_;
};

Status bind_layer(Binder& b, const ModelConfig& c, int64_t il, LayerWeights& l) {
  auto name = [il](std::string_view suffix) { return fmt::format("blk.{}.{}", il, suffix); };
  DRIFT_ASSIGN_OR_RETURN(l.attn_norm, b.vector(name("attn_norm.weight"), c.n_embd));
  DRIFT_ASSIGN_OR_RETURN(l.wq, b.matrix(name("attn_q.weight"), c.q_dim(), c.n_embd));
  DRIFT_ASSIGN_OR_RETURN(l.wk, b.matrix(name("attn_k.weight"), c.kv_dim(), c.n_embd));
  DRIFT_ASSIGN_OR_RETURN(l.wv, b.matrix(name("attn_v.weight"), c.v_dim(), c.n_embd));
  DRIFT_ASSIGN_OR_RETURN(l.wo,
                         b.matrix(name("attn_output.weight"), c.n_embd, c.n_heads * c.head_dim_v));
  if (c.qkv_bias) {
    DRIFT_ASSIGN_OR_RETURN(l.bq, b.vector(name("attn_q.bias"), c.q_dim()));
    DRIFT_ASSIGN_OR_RETURN(l.bk, b.vector(name("attn_k.bias"), c.kv_dim()));
    DRIFT_ASSIGN_OR_RETURN(l.bv, b.vector(name("attn_v.bias"), c.v_dim()));
  }
  if (c.wo_bias) {
    DRIFT_ASSIGN_OR_RETURN(l.bo, b.vector(name("attn_output.bias"), c.n_embd));
  }
  if (c.attn_sinks) {
    DRIFT_ASSIGN_OR_RETURN(l.attn_sinks, b.vector(name("attn_sinks.weight"), c.n_heads));
  }
  if (c.qk_norm) {
    DRIFT_ASSIGN_OR_RETURN(l.q_norm, b.vector(name("attn_q_norm.weight"), c.head_dim));
    DRIFT_ASSIGN_OR_RETURN(l.k_norm, b.vector(name("attn_k_norm.weight"), c.head_dim));
  }
  if (c.post_norms) {
    DRIFT_ASSIGN_OR_RETURN(l.attn_post_norm,
                           b.vector(name("post_attention_norm.weight"), c.n_embd));
    DRIFT_ASSIGN_OR_RETURN(l.ffn_post_norm, b.vector(name("post_ffw_norm.weight"), c.n_embd));
  }
  // gpt-oss names the norm before its feed-forward post_attention_norm (it follows attention).
  const char* ffn_norm =
      c.arch == Architecture::kGptOss ? "post_attention_norm.weight" : "ffn_norm.weight";
  DRIFT_ASSIGN_OR_RETURN(l.ffn_norm, b.vector(name(ffn_norm), c.n_embd));
  if (c.moe()) {
    DRIFT_ASSIGN_OR_RETURN(l.ffn_gate_inp,
                           b.matrix(name("ffn_gate_inp.weight"), c.n_expert, c.n_embd));
    DRIFT_ASSIGN_OR_RETURN(l.ffn_gate_exps, b.expert_matrices(name("ffn_gate_exps.weight"),
                                                              c.n_expert, c.n_ff_exp, c.n_embd));
    DRIFT_ASSIGN_OR_RETURN(l.ffn_up_exps, b.expert_matrices(name("ffn_up_exps.weight"), c.n_expert,
                                                            c.n_ff_exp, c.n_embd));
    DRIFT_ASSIGN_OR_RETURN(l.ffn_down_exps, b.expert_matrices(name("ffn_down_exps.weight"),
                                                              c.n_expert, c.n_embd, c.n_ff_exp));
    if (c.arch == Architecture::kGptOss) {
      DRIFT_ASSIGN_OR_RETURN(l.ffn_gate_inp_b, b.vector(name("ffn_gate_inp.bias"), c.n_expert));
      DRIFT_ASSIGN_OR_RETURN(l.ffn_gate_exps_b,
                             b.expert_vectors(name("ffn_gate_exps.bias"), c.n_expert, c.n_ff_exp));
      DRIFT_ASSIGN_OR_RETURN(l.ffn_up_exps_b,
                             b.expert_vectors(name("ffn_up_exps.bias"), c.n_expert, c.n_ff_exp));
      DRIFT_ASSIGN_OR_RETURN(l.ffn_down_exps_b,
                             b.expert_vectors(name("ffn_down_exps.bias"), c.n_expert, c.n_embd));
    }
    return Status::Ok();
  }
  DRIFT_ASSIGN_OR_RETURN(l.ffn_gate, b.matrix(name("ffn_gate.weight"), c.n_ff, c.n_embd));
  DRIFT_ASSIGN_OR_RETURN(l.ffn_up, b.matrix(name("ffn_up.weight"), c.n_ff, c.n_embd));
  DRIFT_ASSIGN_OR_RETURN(l.ffn_down, b.matrix(name("ffn_down.weight"), c.n_embd, c.n_ff));
  return Status::Ok();
}

uint64_t bytes_of(const WeightMatrix& m) { return static_cast<uint64_t>(m.rows) * m.row_bytes; }

}  // namespace

namespace {

// The matrices of a layer, const or not (Layer: LayerWeights or const LayerWeights).
template <typename Layer, typename Matrix = std::conditional_t<std::is_const_v<Layer>,
                                                               const WeightMatrix, WeightMatrix>>
std::vector<Matrix*> matrices_of(Layer& l) {
  std::vector<Matrix*> out = {&l.wq, &l.wk, &l.wv, &l.wo};
  if (l.ffn_gate_inp.data != nullptr) {
    out.push_back(&l.ffn_gate_inp);
    for (auto* experts : {&l.ffn_gate_exps, &l.ffn_up_exps, &l.ffn_down_exps})
      for (Matrix& m : *experts) out.push_back(&m);
  } else {
    out.insert(out.end(), {&l.ffn_gate, &l.ffn_up, &l.ffn_down});
  }
  return out;
}

}  // namespace

std::vector<const WeightMatrix*> layer_matrices(const LayerWeights& l) { return matrices_of(l); }

Expected<ModelWeights> bind_model_weights(const GgufFile& file, const ModelConfig& c, Isa isa) {
  ModelWeights w;
  Binder b(file, isa, w);
  if (b.has("rope_freqs.weight")) {
    DRIFT_ASSIGN_OR_RETURN(w.rope_freqs, b.vector("rope_freqs.weight", c.rope_dims / 2));
    for (int64_t i = 0; i < w.rope_freqs.size; ++i)
      if (!(w.rope_freqs.data[i] > 0.0f) || !std::isfinite(w.rope_freqs.data[i]))
        return make_error(
            "rope_freqs.weight[{}] is {}: RoPE frequency factors must be finite "
            "and positive",
            i, w.rope_freqs.data[i]);
  }
  DRIFT_ASSIGN_OR_RETURN(w.token_embd, b.matrix("token_embd.weight", c.n_vocab, c.n_embd));
  DRIFT_ASSIGN_OR_RETURN(w.output_norm, b.vector("output_norm.weight", c.n_embd));
  if (b.has("output.weight")) {
    DRIFT_ASSIGN_OR_RETURN(w.output, b.matrix("output.weight", c.n_vocab, c.n_embd));
  } else {
    w.output = w.token_embd;  // tied embeddings
  }
  w.layers.resize(c.n_layers);
  for (int64_t il = 0; il < c.n_layers; ++il)
    DRIFT_RETURN_IF_ERROR(bind_layer(b, c, il, w.layers[il]));

  b.add_panels(w.output);
  for (LayerWeights& l : w.layers)
    for (WeightMatrix* m : matrices_of(l)) b.add_panels(*m);

  w.matrix_bytes = bytes_of(w.output);
  for (const LayerWeights& l : w.layers) {
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down})
      w.matrix_bytes += bytes_of(*m);  // zero for the dense matrices of an expert layer
    if (!c.moe()) continue;
    w.matrix_bytes += bytes_of(l.ffn_gate_inp);
    for (const auto* experts : {&l.ffn_gate_exps, &l.ffn_up_exps, &l.ffn_down_exps})
      w.matrix_bytes += bytes_of((*experts)[0]) * c.n_expert_used;
  }
  return w;
}

}  // namespace drift
