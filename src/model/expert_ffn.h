// The mixture-of-experts feed-forward of one layer over a batch of tokens: the router's logits,
// each token's top-k experts (expert_routing.h), then every expert's matmuls over all of the
// tokens routed to it at once, so a step reads each chosen expert's weights once however many
// sequences share it (batched decode gains most from that).
//
// Numerical contract, as forward_pass.h's: a token's activation rows are quantized once, per
// token, exactly as for a dense matmul, and the expert matmuls (kernels/panel.h, else
// kernels/matmul.h) compute each (row, token) result independently of the other tokens, so the
// grouping never changes a token's result. The k expert outputs are weighted and summed in
// route order, as llama.cpp's build_moe_ffn does: ((w0 d0 + w1 d1) + w2 d2) + ...
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model_config.h"
#include "model/model_weights.h"
#include "util/cpu_features.h"
#include "util/thread_pool.h"

namespace drift {

class ExpertFeedForward {
 public:
  // Sizes every buffer for up to `max_tokens` tokens, so run() allocates nothing.
  ExpertFeedForward(const ModelConfig& config, const ModelWeights& weights, int64_t max_tokens,
                    Isa isa);

  // out[t][0..n_embd) = sum over token t's experts e of weight_e * down_e(act(gate_e x, up_e x))
  // for x = xn[t] (gpt-oss: each of router, gate, up and down plus its bias). xn:
  // [n_tokens][xn_stride] normalised inputs; out: [n_tokens][out_stride].
  void run(const LayerWeights& l, const float* xn, int64_t xn_stride, int64_t n_tokens, float* out,
           int64_t out_stride, ThreadPool& pool);

 private:
  struct ExpertOutput {
    const std::vector<WeightMatrix>* experts;
    float* y;  // [n_assignments][y_stride] in expert order
    int64_t y_stride;
  };

  void route(const LayerWeights& l, const float* xn, int64_t xn_stride, int64_t n_tokens,
             ThreadPool& pool);
  // Quantizes n_rows rows of x for `m` into xq / sums (rows xq_row_bytes_ / sums_row_bytes_
  // apart) on the calling thread.
  void quantize_rows(const WeightMatrix& m, const float* x, int64_t x_stride, int64_t n_rows,
                     uint8_t* xq, uint8_t* sums) const;
  // Quantizes the token rows x for `m` into every expert-ordered row of xq_ / sums_ they go to.
  void quantize_by_expert(const WeightMatrix& m, const float* x, int64_t x_stride, int64_t n_tokens,
                          ThreadPool& pool);
  // Every expert's matmuls over its rows of xq_: the pool splits the panels of all active experts
  // by their cost (panels x tokens).
  void expert_matmuls(std::span<const ExpertOutput> outputs, ThreadPool& pool);
  // gate_ = act(gate_ + gate bias, up_ + up bias) per expert-ordered row, quantized into xq_ /
  // sums_ for the down matmul.
  void activate_and_quantize(const LayerWeights& l, ThreadPool& pool);
  void combine(const WeightVector& down_bias, int64_t n_tokens, float* out, int64_t out_stride,
               ThreadPool& pool);
  // fn(begin, end) over [0, n) rows: split over the pool when there are enough.
  void for_rows(int64_t n, ThreadPool& pool, FunctionRef<void(int64_t, int64_t)> fn);

  const ModelConfig& config_;
  const Isa isa_;
  const int64_t k_;  // experts per token
  // A = max_tokens * k assignments; assignment a = t * k + i is token t's i-th expert.
  std::vector<float> router_logits_;  // [T][n_expert]
  std::vector<int32_t> experts_;      // [A] expert id of each assignment
  std::vector<float> weights_;        // [A] its weight
  std::vector<int32_t> offsets_;      // [n_expert + 1] expert e's rows: [offsets[e], offsets[e+1])
  std::vector<int32_t> order_;        // [A] assignment at each expert-ordered row
  std::vector<int32_t> rank_;         // [A] expert-ordered row of each assignment
  std::vector<float> gate_;           // [A][n_ff_exp] expert order
  std::vector<float> up_;             // [A][n_ff_exp] expert order
  std::vector<float> down_;           // [A][n_embd] expert order
  std::vector<uint8_t> xq_tokens_;    // [T][xq_row_bytes_] quantized token rows
  std::vector<uint8_t> sums_tokens_;  // [T][sums_row_bytes_] their panel sums
  std::vector<uint8_t> xq_;           // [A][xq_row_bytes_] quantized rows in expert order
  std::vector<uint8_t> sums_;         // [A][sums_row_bytes_] their panel sums
  int64_t xq_row_bytes_ = 0;
  int64_t sums_row_bytes_ = 0;
  int64_t n_assignments_ = 0;  // of the running step
};

}  // namespace drift
