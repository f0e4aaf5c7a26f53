#include "model/expert_ffn.h"

#include <algorithm>
#include <cstring>

#include "kernels/activation.h"
#include "kernels/elementwise.h"
#include "kernels/panel.h"
#include "kernels/quantize.h"
#include "model/expert_routing.h"

namespace drift {
namespace {

int64_t round_up_64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

// Largest activation row and panel-sums row of the router and expert matrices.
void max_row_bytes(const ModelWeights& w, int64_t& xq_bytes, int64_t& sums_bytes) {
  xq_bytes = sums_bytes = 0;
  for (const LayerWeights& l : w.layers) {
    auto consider = [&](const WeightMatrix& m) {
      xq_bytes = std::max(xq_bytes, kernels::activation_row_bytes(m.format, m.cols));
      if (m.has_panels())
        sums_bytes = std::max(sums_bytes, kernels::panel_sums_row_bytes(m.format, m.cols));
    };
    consider(l.ffn_gate_inp);
    for (const auto* experts : {&l.ffn_gate_exps, &l.ffn_up_exps, &l.ffn_down_exps})
      if (!experts->empty()) consider(experts->front());
  }
  xq_bytes = round_up_64(xq_bytes);
  sums_bytes = round_up_64(sums_bytes);
}

// y[t][r] = m row r . activation row t for the rows r of units (panels, or 16-row groups of a
// row-layout matrix) [unit_begin, unit_end) and the n_rows activation rows of xq (with their panel
// sums).
void multiply(const WeightMatrix& m, const uint8_t* xq, int64_t xq_row_bytes, const uint8_t* sums,
              int64_t sums_row_bytes, int64_t n_rows, float* y, int64_t y_stride,
              int64_t unit_begin, int64_t unit_end) {
  if (m.has_panels()) {
    m.panel_matmul(kernels::PanelArgs{m.panels, m.rows, m.cols, xq, xq_row_bytes, sums,
                                      sums_row_bytes, y, y_stride, n_rows},
                   unit_begin, unit_end);
  } else {
    m.matmul(
        kernels::MatmulArgs{m.data, m.row_bytes, xq, xq_row_bytes, y, y_stride, m.cols, n_rows},
        std::min(m.rows, unit_begin * 16), std::min(m.rows, unit_end * 16));
  }
}

}  // namespace

ExpertFeedForward::ExpertFeedForward(const ModelConfig& config, const ModelWeights& weights,
                                     int64_t max_tokens, Isa isa)
    : config_(config), isa_(isa), k_(config.n_expert_used) {
  const ModelConfig& c = config;
  const int64_t T = max_tokens, A = max_tokens * c.n_expert_used;
  router_logits_.resize(T * c.n_expert);
  experts_.resize(A);
  weights_.resize(A);
  offsets_.resize(c.n_expert + 1);
  order_.resize(A);
  rank_.resize(A);
  gate_.resize(A * c.n_ff_exp);
  up_.resize(A * c.n_ff_exp);
  down_.resize(A * c.n_embd);
  max_row_bytes(weights, xq_row_bytes_, sums_row_bytes_);
  xq_tokens_.resize(T * xq_row_bytes_ + 64);
  sums_tokens_.resize(T * sums_row_bytes_ + 64);
  xq_.resize(A * xq_row_bytes_ + 64);
  sums_.resize(A * sums_row_bytes_ + 64);
}

void ExpertFeedForward::for_rows(int64_t n, ThreadPool& pool,
                                 FunctionRef<void(int64_t, int64_t)> fn) {
  constexpr int64_t kParallelRows = 16;
  if (n < kParallelRows || pool.size() == 1) return fn(0, n);
  pool.run([&](int index, int count) {
    const Range r = split_range(n, index, count);
    if (r.begin < r.end) fn(r.begin, r.end);
  });
}

// The layer, as llama.cpp's build_moe_ffn: route, gate and up, activation, down, weighted sum.
// Each phase after routing is one pass of the pool: the biases are added where their rows are
// read next (gate and up in activate, down in combine), and the down matmul's input is quantized
// in the same pass that computes it.
void ExpertFeedForward::run(const LayerWeights& l, const float* xn, int64_t xn_stride,
                            int64_t n_tokens, float* out, int64_t out_stride, ThreadPool& pool) {
  const ModelConfig& c = config_;
  route(l, xn, xn_stride, n_tokens, pool);
  const ExpertOutput gate_up[] = {{&l.ffn_gate_exps, gate_.data(), c.n_ff_exp},
                                  {&l.ffn_up_exps, up_.data(), c.n_ff_exp}};
  const WeightMatrix& g = l.ffn_gate_exps.front();
  const WeightMatrix& u = l.ffn_up_exps.front();
  if (g.format == u.format && g.has_panels() == u.has_panels()) {
    quantize_by_expert(g, xn, xn_stride, n_tokens, pool);
    expert_matmuls(gate_up, pool);
  } else {  // each needs its own activation format
    quantize_by_expert(g, xn, xn_stride, n_tokens, pool);
    expert_matmuls({&gate_up[0], 1}, pool);
    quantize_by_expert(u, xn, xn_stride, n_tokens, pool);
    expert_matmuls({&gate_up[1], 1}, pool);
  }
  activate_and_quantize(l, pool);
  const ExpertOutput down[] = {{&l.ffn_down_exps, down_.data(), c.n_embd}};
  expert_matmuls(down, pool);
  combine(l.ffn_down_exps_b, n_tokens, out, out_stride, pool);
}

// Router logits (a dense matmul with the router, through the kernels of its format), then each
// token's experts and weights, then the assignments grouped by expert.
void ExpertFeedForward::route(const LayerWeights& l, const float* xn, int64_t xn_stride,
                              int64_t n_tokens, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const WeightMatrix& r = l.ffn_gate_inp;
  for_rows(n_tokens, pool, [&](int64_t begin, int64_t end) {
    quantize_rows(r, xn + begin * xn_stride, xn_stride, end - begin,
                  &xq_tokens_[begin * xq_row_bytes_], &sums_tokens_[begin * sums_row_bytes_]);
  });
  const int64_t units = (r.rows + 15) / 16;
  auto logits = [&](int index, int count) {
    const Range work = split_range(units, index, count);
    if (work.begin < work.end)
      multiply(r, xq_tokens_.data(), xq_row_bytes_, sums_tokens_.data(), sums_row_bytes_, n_tokens,
               router_logits_.data(), c.n_expert, work.begin, work.end);
  };
  // Up to 16 experts are one unit of work, which no second thread can share.
  if (units == 1) {
    logits(0, 1);
  } else {
    pool.run(logits);
  }
  if (l.ffn_gate_inp_b.present())
    for (int64_t t = 0; t < n_tokens; ++t)
      kernels::add(isa_, &router_logits_[t * c.n_expert], l.ffn_gate_inp_b.data,
                   &router_logits_[t * c.n_expert], c.n_expert);
  for (int64_t t = 0; t < n_tokens; ++t)
    route_token(&router_logits_[t * c.n_expert], c.n_expert, k_, c.expert_gating,
                c.expert_weights_norm, &experts_[t * k_], &weights_[t * k_]);
  n_assignments_ = n_tokens * k_;
  group_by_expert({experts_.data(), static_cast<size_t>(n_assignments_)}, c.n_expert,
                  ExpertGroups{offsets_, order_, rank_});
}

// Token rows are quantized once each, then their bytes copied to every row of theirs in expert
// order (k copies of a row cost far less than quantizing it k times), in the same pass.
void ExpertFeedForward::quantize_by_expert(const WeightMatrix& m, const float* x, int64_t x_stride,
                                           int64_t n_tokens, ThreadPool& pool) {
  const int64_t xq_bytes = kernels::activation_row_bytes(m.format, m.cols);
  const int64_t sums_bytes = m.has_panels() ? kernels::panel_sums_row_bytes(m.format, m.cols) : 0;
  for_rows(n_tokens, pool, [&](int64_t begin, int64_t end) {
    quantize_rows(m, x + begin * x_stride, x_stride, end - begin,
                  &xq_tokens_[begin * xq_row_bytes_], &sums_tokens_[begin * sums_row_bytes_]);
    for (int64_t t = begin; t < end; ++t)
      for (int64_t i = 0; i < k_; ++i) {
        const int64_t row = rank_[t * k_ + i];
        std::memcpy(&xq_[row * xq_row_bytes_], &xq_tokens_[t * xq_row_bytes_], xq_bytes);
        std::memcpy(&sums_[row * sums_row_bytes_], &sums_tokens_[t * sums_row_bytes_], sums_bytes);
      }
  });
}

// n_rows rows of x for `m` into xq / sums (rows xq_row_bytes_ / sums_row_bytes_ apart), on the
// calling thread.
void ExpertFeedForward::quantize_rows(const WeightMatrix& m, const float* x, int64_t x_stride,
                                      int64_t n_rows, uint8_t* xq, uint8_t* sums) const {
  kernels::quantize_activations(isa_, m.format, x, x_stride, n_rows, m.cols, xq, xq_row_bytes_);
  if (m.has_panels())
    kernels::prepare_panel_sums(m.format, xq, xq_row_bytes_, n_rows, m.cols, sums, sums_row_bytes_);
}

// Work item: one panel (16 rows) of one output matrix of one expert, over that expert's rows.
// Its cost is the expert's row count, so the threads split the sum of panels x rows evenly: panel
// p of an expert whose items start at cost `base` belongs to the thread whose share holds
// base + p * rows.
void ExpertFeedForward::expert_matmuls(std::span<const ExpertOutput> outputs, ThreadPool& pool) {
  const int64_t n_expert = config_.n_expert;
  int64_t total = 0;
  for (const ExpertOutput& o : outputs)
    total += (o.experts->front().rows + 15) / 16 * n_assignments_;
  pool.run([&](int index, int count) {
    const Range share = split_range(total, index, count);
    int64_t base = 0;
    for (const ExpertOutput& o : outputs) {
      for (int64_t e = 0; e < n_expert; ++e) {
        const int64_t rows = offsets_[e + 1] - offsets_[e];
        if (rows == 0) continue;
        const WeightMatrix& m = (*o.experts)[e];
        const int64_t units = (m.rows + 15) / 16;
        const int64_t span = units * rows;
        if (base >= share.end) return;
        if (base + span > share.begin) {
          const int64_t begin = std::max<int64_t>(0, (share.begin - base + rows - 1) / rows);
          const int64_t end = std::min(units, (share.end - base + rows - 1) / rows);
          const int64_t first = offsets_[e];
          if (begin < end)
            multiply(m, xq_.data() + first * xq_row_bytes_, xq_row_bytes_,
                     sums_.data() + first * sums_row_bytes_, sums_row_bytes_, rows,
                     o.y + first * o.y_stride, o.y_stride, begin, end);
        }
        base += span;
      }
    }
  });
}

// For every expert-ordered row: its expert's gate and up biases (gpt-oss), the activation
// (gate_ = silu(gate_) * up_, gpt-oss: swiglu_oai(gate_, up_)), then the row quantized as the
// down matmul's input.
void ExpertFeedForward::activate_and_quantize(const LayerWeights& l, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int64_t n = c.n_ff_exp;
  const WeightMatrix& down = l.ffn_down_exps.front();
  for_rows(n_assignments_, pool, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      float* g = &gate_[row * n];
      float* u = &up_[row * n];
      const int64_t expert = experts_[order_[row]];
      if (l.ffn_gate_exps_b.present())
        kernels::add(isa_, g, l.ffn_gate_exps_b.data + expert * n, g, n);
      if (l.ffn_up_exps_b.present()) kernels::add(isa_, u, l.ffn_up_exps_b.data + expert * n, u, n);
      if (c.activation == Activation::kSwigluOai) {
        kernels::swiglu_oai(isa_, g, u, g, n, c.swiglu_alpha, c.swiglu_limit);
      } else {
        kernels::silu(isa_, g, g, n);
        kernels::mul(isa_, g, u, g, n);
      }
    }
    quantize_rows(down, &gate_[begin * n], n, end - begin, &xq_[begin * xq_row_bytes_],
                  &sums_[begin * sums_row_bytes_]);
  });
}

// out[t] = w[t,0] d[t,0] + w[t,1] d[t,1] + ... in route order (llama.cpp: ggml_mul of the down
// outputs by the weights, then ggml_add of the k views in order), each d first plus its expert's
// down bias (gpt-oss; ggml_add_id before the weighting).
void ExpertFeedForward::combine(const WeightVector& down_bias, int64_t n_tokens, float* out,
                                int64_t out_stride, ThreadPool& pool) {
  const int64_t n = config_.n_embd;
  for_rows(n_tokens, pool, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* o = out + t * out_stride;
      for (int64_t i = 0; i < k_; ++i) {
        const float w = weights_[t * k_ + i];
        float* d = &down_[rank_[t * k_ + i] * n];  // this token's row alone
        if (down_bias.present())
          kernels::add(isa_, d, down_bias.data + static_cast<int64_t>(experts_[t * k_ + i]) * n, d,
                       n);
        if (i == 0) {
          kernels::scale(isa_, d, w, o, n);
        } else {
          for (int64_t j = 0; j < n; ++j) {
            const float wd = w * d[j];  // rounded before the add, as two ggml ops
            o[j] += wd;
          }
        }
      }
    }
  });
}

}  // namespace drift
