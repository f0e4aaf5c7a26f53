#include "model/forward_pass.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/dequantize.h"
#include "kernels/fp16.h"
#include "kernels/quantize.h"

namespace drift {
namespace {

// ggml's RMSNorm (sum of squares accumulated in double) followed by the weight multiply.
// x, w, y: [n].
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / n + eps));
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

// Rotates the first rope_dims dimensions of one head in place, as ggml_rope_ext does with
// ext_factor 0: theta for pair i is pos * freq_scale * base^(-2i/rope_dims), computed by
// repeated multiplication in float exactly as ggml builds its cos/sin cache.
void rope_head(float* x, int64_t rope_dims, float pos, float base, float freq_scale,
               RopeLayout layout) {
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(rope_dims));
  float theta = pos;
  const int64_t half = rope_dims / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float angle = freq_scale * theta;
    const float c = std::cos(angle), s = std::sin(angle);
    float* a = layout == RopeLayout::kAdjacent ? &x[2 * i] : &x[i];
    float* b = layout == RopeLayout::kAdjacent ? &x[2 * i + 1] : &x[i + half];
    const float x0 = *a, x1 = *b;
    *a = x0 * c - x1 * s;
    *b = x0 * s + x1 * c;
    theta *= theta_scale;
  }
}

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

// Largest activation row any matrix of the model needs, so one buffer serves every matmul.
int64_t max_activation_row_bytes(const ModelWeights& w) {
  int64_t bytes = kernels::activation_row_bytes(w.output.format, w.output.cols);
  for (const LayerWeights& l : w.layers)
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down})
      bytes = std::max(bytes, kernels::activation_row_bytes(m->format, m->cols));
  return (bytes + 63) / 64 * 64;
}

}  // namespace

ForwardPass::ForwardPass(const Model& model, ForwardLimits limits)
    : model_(model), config_(model.config()), limits_(limits) {}

Expected<std::unique_ptr<ForwardPass>> ForwardPass::create(const Model& model,
                                                           ForwardLimits limits) {
  const ModelConfig& c = model.config();
  if (limits.max_tokens < 1 || limits.max_tokens > 65536)
    return make_error("max batch tokens must be 1 to 65536, got {}", limits.max_tokens);
  if (limits.max_sequences < 1 || limits.max_sequences > limits.max_tokens)
    return make_error("max batch sequences must be 1 to {} (the token limit), got {}",
                      limits.max_tokens, limits.max_sequences);
  if (limits.max_context < 1 || limits.max_context > (1 << 24))
    return make_error("max context must be 1 to {}, got {}", 1 << 24, limits.max_context);
  if (limits.threads < 1 || limits.threads > 1024)
    return make_error("threads must be 1 to 1024, got {}", limits.threads);

  std::unique_ptr<ForwardPass> f(new ForwardPass(model, limits));
  const int64_t T = limits.max_tokens;
  f->xn_stride_ = std::max(c.n_embd, c.n_ff);
  f->x_.resize(T * c.n_embd);
  f->xn_.resize(T * f->xn_stride_);
  f->q_.resize(T * c.q_dim());
  f->k_.resize(T * c.kv_dim());
  f->v_.resize(T * c.v_dim());
  f->attn_out_.resize(T * c.n_heads * c.head_dim_v);
  f->proj_.resize(T * c.n_embd);
  f->gate_.resize(T * c.n_ff);
  f->up_.resize(T * c.n_ff);
  f->xq_row_bytes_ = max_activation_row_bytes(model.weights());
  f->xq_.resize(T * f->xq_row_bytes_ + 64);
  f->max_threads_ = limits.threads;
  f->scores_.resize(static_cast<size_t>(limits.threads) * limits.max_context);
  f->token_sequence_.resize(T);
  if (c.activation == Activation::kGeluTanh) {
    // ggml evaluates GELU through a table indexed by the input rounded to fp16; the table holds
    // fp16(gelu(x)) for every fp16 x.
    f->gelu_table_.resize(1 << 16);
    for (uint32_t h = 0; h < (1u << 16); ++h) {
      float x = kernels::fp16_to_f32(static_cast<uint16_t>(h));
      f->gelu_table_[h] = kernels::fp16_to_f32(kernels::f32_to_fp16(gelu_tanh(x)));
    }
  }
  return f;
}

Status ForwardPass::validate(const ForwardBatch& batch, const KvPages& kv,
                             std::span<float> logits) const {
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  if (n < 1 || n > limits_.max_tokens)
    return make_error("batch has {} tokens, expected 1 to {}", n, limits_.max_tokens);
  if (batch.sequences.empty() ||
      static_cast<int64_t>(batch.sequences.size()) > limits_.max_sequences)
    return make_error("batch has {} sequences, expected 1 to {}", batch.sequences.size(),
                      limits_.max_sequences);
  int64_t expected_begin = 0, n_logits = 0;
  for (const ForwardSequence& s : batch.sequences) {
    if (s.token_begin != expected_begin || s.n_tokens < 1)
      return make_error("batch sequences must cover the tokens in order without gaps");
    expected_begin += s.n_tokens;
    if (s.start_pos < 0 || s.start_pos + s.n_tokens > limits_.max_context)
      return make_error("positions [{}, {}) exceed the context limit {}", s.start_pos,
                        s.start_pos + s.n_tokens, limits_.max_context);
    const int64_t needed_pages = (s.start_pos + s.n_tokens + kv.page_size() - 1) / kv.page_size();
    if (static_cast<int64_t>(s.page_table.size()) < needed_pages)
      return make_error("page table has {} pages, {} needed for position {}", s.page_table.size(),
                        needed_pages, s.start_pos + s.n_tokens - 1);
    for (int64_t i = 0; i < needed_pages; ++i)
      if (s.page_table[i] < 0 || s.page_table[i] >= kv.num_pages())
        return make_error("page id {} is outside the KV cache's {} pages", s.page_table[i],
                          kv.num_pages());
    n_logits += s.all_logits ? s.n_tokens : s.want_logits ? 1 : 0;
  }
  if (expected_begin != n)
    return make_error("batch sequences cover {} of {} tokens", expected_begin, n);
  for (int32_t token : batch.tokens)
    if (token < 0 || token >= config_.n_vocab)
      return make_error("token id {} is outside the vocabulary of {}", token, config_.n_vocab);
  if (static_cast<int64_t>(logits.size()) < n_logits * config_.n_vocab)
    return make_error("logits buffer holds {} floats, {} needed", logits.size(),
                      n_logits * config_.n_vocab);
  return Status::Ok();
}

Status ForwardPass::run(const ForwardBatch& batch, KvPages& kv, ThreadPool& pool,
                        std::span<float> logits) {
  DRIFT_RETURN_IF_ERROR(validate(batch, kv, logits));
  if (pool.size() > max_threads_)
    return make_error("thread pool of {} is larger than the {} threads the pass was sized for",
                      pool.size(), max_threads_);
  const int64_t n_tokens = static_cast<int64_t>(batch.tokens.size());
  for (size_t s = 0; s < batch.sequences.size(); ++s)
    for (int64_t i = 0; i < batch.sequences[s].n_tokens; ++i)
      token_sequence_[batch.sequences[s].token_begin + i] = static_cast<int64_t>(s);

  embed(batch);
  for (int64_t il = 0; il < config_.n_layers; ++il) {
    attention_block(il, batch, kv, pool);
    ffn_block(il, n_tokens, pool);
  }
  output_logits(batch, pool, logits);
  return Status::Ok();
}

void ForwardPass::embed(const ForwardBatch& batch) {
  const WeightMatrix& e = model_.weights().token_embd;
  for (size_t t = 0; t < batch.tokens.size(); ++t) {
    float* row = &x_[t * config_.n_embd];
    kernels::dequantize_row(e.format, e.data + batch.tokens[t] * e.row_bytes, row, e.cols);
    if (config_.embedding_scale != 1.0f)
      for (int64_t i = 0; i < config_.n_embd; ++i) row[i] *= config_.embedding_scale;
  }
}

void ForwardPass::matmul(const WeightMatrix& m, const float* x, int64_t x_stride, int64_t n_tokens,
                         float* y, int64_t y_stride, ThreadPool& pool) {
  kernels::quantize_activations(model_.isa(), m.format, x, x_stride, n_tokens, m.cols, xq_.data(),
                                xq_row_bytes_);
  kernels::MatmulArgs args{m.data, m.row_bytes, xq_.data(), xq_row_bytes_,
                           y,      y_stride,    m.cols,     n_tokens};
  const kernels::MatmulFn fn = m.matmul;
  const int64_t rows = m.rows;
  pool.run([&](int index, int count) {
    // Split on multiples of 16 rows so that SIMD kernels see whole row groups.
    const int64_t groups = (rows + 15) / 16;
    Range r = split_range(groups, index, count);
    fn(args, std::min(rows, r.begin * 16), std::min(rows, r.end * 16));
  });
}

void ForwardPass::attention_block(int64_t il, const ForwardBatch& batch, KvPages& kv,
                                  ThreadPool& pool) {
  const LayerWeights& l = model_.weights().layers[il];
  const ModelConfig& c = config_;
  const int64_t n = static_cast<int64_t>(batch.tokens.size());

  for (int64_t t = 0; t < n; ++t)
    rms_norm(&x_[t * c.n_embd], l.attn_norm.data, c.n_embd, c.rms_eps, &xn_[t * xn_stride_]);
  matmul(l.wq, xn_.data(), xn_stride_, n, q_.data(), c.q_dim(), pool);
  matmul(l.wk, xn_.data(), xn_stride_, n, k_.data(), c.kv_dim(), pool);
  matmul(l.wv, xn_.data(), xn_stride_, n, v_.data(), c.v_dim(), pool);

  const LayerConfig& lc = c.layers[il];
  for (int64_t t = 0; t < n; ++t) {
    const ForwardSequence& s = batch.sequences[token_sequence_[t]];
    const float pos = static_cast<float>(s.start_pos + (t - s.token_begin));
    float* q = &q_[t * c.q_dim()];
    float* k = &k_[t * c.kv_dim()];
    float* v = &v_[t * c.v_dim()];
    if (c.qkv_bias) {
      for (int64_t i = 0; i < c.q_dim(); ++i) q[i] += l.bq.data[i];
      for (int64_t i = 0; i < c.kv_dim(); ++i) k[i] += l.bk.data[i];
      for (int64_t i = 0; i < c.v_dim(); ++i) v[i] += l.bv.data[i];
    }
    for (int64_t h = 0; h < c.n_heads; ++h) {
      float* qh = q + h * c.head_dim;
      if (c.qk_norm) rms_norm(qh, l.q_norm.data, c.head_dim, c.rms_eps, qh);
      rope_head(qh, c.rope_dims, pos, lc.rope_base, c.rope_freq_scale, c.rope_layout);
    }
    for (int64_t h = 0; h < c.n_kv_heads; ++h) {
      float* kh = k + h * c.head_dim;
      if (c.qk_norm) rms_norm(kh, l.k_norm.data, c.head_dim, c.rms_eps, kh);
      rope_head(kh, c.rope_dims, pos, lc.rope_base, c.rope_freq_scale, c.rope_layout);
    }
    // Store this token's K and V (fp16) in its slot.
    const int64_t p = static_cast<int64_t>(pos);
    const int64_t page = s.page_table[p / kv.page_size()];
    const int64_t slot = p % kv.page_size();
    for (int64_t h = 0; h < c.n_kv_heads; ++h) {
      uint16_t* kd = kv.keys(page, il, h) + slot * c.head_dim;
      uint16_t* vd = kv.values(page, il, h) + slot * c.head_dim_v;
      for (int64_t i = 0; i < c.head_dim; ++i) kd[i] = kernels::f32_to_fp16(k[h * c.head_dim + i]);
      for (int64_t i = 0; i < c.head_dim_v; ++i)
        vd[i] = kernels::f32_to_fp16(v[h * c.head_dim_v + i]);
    }
  }

  attend(il, batch, kv, pool);

  const int64_t o_dim = c.n_heads * c.head_dim_v;
  matmul(l.wo, attn_out_.data(), o_dim, n, proj_.data(), c.n_embd, pool);
  for (int64_t t = 0; t < n; ++t) {
    float* o = &proj_[t * c.n_embd];
    if (c.post_norms) rms_norm(o, l.attn_post_norm.data, c.n_embd, c.rms_eps, o);
    float* x = &x_[t * c.n_embd];
    for (int64_t i = 0; i < c.n_embd; ++i) x[i] += o[i];
  }
}

// softmax(q . K^T * scale) V for every (token, head), over the positions the token may see:
// [0, pos] or, in a sliding-window layer, the last `sliding_window` of them. Positions are visited
// in increasing order whatever the batch, so each result is batch-independent.
void ForwardPass::attend(int64_t il, const ForwardBatch& batch, KvPages& kv, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const int64_t group = c.n_heads / c.n_kv_heads;
  const bool sliding = c.layers[il].sliding_window;
  const int64_t page_size = kv.page_size();
  pool.run([&](int index, int count) {
    float* scores = &scores_[static_cast<size_t>(index) * limits_.max_context];
    Range work = split_range(n * c.n_heads, index, count);
    for (int64_t item = work.begin; item < work.end; ++item) {
      const int64_t t = item / c.n_heads, h = item % c.n_heads, kvh = h / group;
      const ForwardSequence& s = batch.sequences[token_sequence_[t]];
      const int64_t pos = s.start_pos + (t - s.token_begin);
      const int64_t first = sliding ? std::max<int64_t>(0, pos - c.sliding_window + 1) : 0;
      const float* q = &q_[t * c.q_dim() + h * c.head_dim];
      float max_score = -INFINITY;
      for (int64_t p = first; p <= pos; ++p) {
        const uint16_t* key =
            kv.keys(s.page_table[p / page_size], il, kvh) + (p % page_size) * c.head_dim;
        float dot = 0.0f;
        for (int64_t i = 0; i < c.head_dim; ++i) dot += q[i] * kernels::fp16_to_f32(key[i]);
        scores[p - first] = dot * c.attention_scale;
        max_score = std::max(max_score, scores[p - first]);
      }
      float sum = 0.0f;
      for (int64_t p = first; p <= pos; ++p) {
        scores[p - first] = std::exp(scores[p - first] - max_score);
        sum += scores[p - first];
      }
      float* out = &attn_out_[t * c.n_heads * c.head_dim_v + h * c.head_dim_v];
      std::fill(out, out + c.head_dim_v, 0.0f);
      for (int64_t p = first; p <= pos; ++p) {
        const uint16_t* value =
            kv.values(s.page_table[p / page_size], il, kvh) + (p % page_size) * c.head_dim_v;
        const float weight = scores[p - first];
        for (int64_t i = 0; i < c.head_dim_v; ++i)
          out[i] += weight * kernels::fp16_to_f32(value[i]);
      }
      const float inv = 1.0f / sum;
      for (int64_t i = 0; i < c.head_dim_v; ++i) out[i] *= inv;
    }
  });
}

void ForwardPass::ffn_block(int64_t il, int64_t n, ThreadPool& pool) {
  const LayerWeights& l = model_.weights().layers[il];
  const ModelConfig& c = config_;
  for (int64_t t = 0; t < n; ++t)
    rms_norm(&x_[t * c.n_embd], l.ffn_norm.data, c.n_embd, c.rms_eps, &xn_[t * xn_stride_]);
  matmul(l.ffn_gate, xn_.data(), xn_stride_, n, gate_.data(), c.n_ff, pool);
  matmul(l.ffn_up, xn_.data(), xn_stride_, n, up_.data(), c.n_ff, pool);
  for (int64_t t = 0; t < n; ++t) {
    const float* g = &gate_[t * c.n_ff];
    const float* u = &up_[t * c.n_ff];
    float* h = &xn_[t * xn_stride_];
    if (c.activation == Activation::kGeluTanh) {
      for (int64_t i = 0; i < c.n_ff; ++i) {
        float gi = g[i];
        float act = gi <= -10.0f ? 0.0f : gi >= 10.0f ? gi : gelu_table_[kernels::f32_to_fp16(gi)];
        h[i] = act * u[i];
      }
    } else {
      for (int64_t i = 0; i < c.n_ff; ++i) h[i] = silu(g[i]) * u[i];
    }
  }
  matmul(l.ffn_down, xn_.data(), xn_stride_, n, proj_.data(), c.n_embd, pool);
  for (int64_t t = 0; t < n; ++t) {
    float* o = &proj_[t * c.n_embd];
    if (c.post_norms) rms_norm(o, l.ffn_post_norm.data, c.n_embd, c.rms_eps, o);
    float* x = &x_[t * c.n_embd];
    for (int64_t i = 0; i < c.n_embd; ++i) x[i] += o[i];
  }
}

void ForwardPass::output_logits(const ForwardBatch& batch, ThreadPool& pool,
                                std::span<float> logits) {
  const ModelConfig& c = config_;
  const ModelWeights& w = model_.weights();
  // Gather the normalised final hidden state of every token whose logits are wanted into xn_.
  int64_t rows = 0;
  for (const ForwardSequence& s : batch.sequences) {
    if (!s.want_logits && !s.all_logits) continue;
    const int64_t first = s.all_logits ? s.token_begin : s.token_begin + s.n_tokens - 1;
    for (int64_t t = first; t < s.token_begin + s.n_tokens; ++t) {
      rms_norm(&x_[t * c.n_embd], w.output_norm.data, c.n_embd, c.rms_eps, &xn_[rows * xn_stride_]);
      ++rows;
    }
  }
  if (rows == 0) return;
  matmul(w.output, xn_.data(), xn_stride_, rows, logits.data(), c.n_vocab, pool);
  if (c.final_logit_softcap > 0.0f) {
    const float cap = c.final_logit_softcap;
    for (int64_t i = 0; i < rows * c.n_vocab; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
  }
}

}  // namespace drift
