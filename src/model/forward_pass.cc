#include "model/forward_pass.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/activation.h"
#include "kernels/attention_ops.h"
#include "kernels/dequantize.h"
#include "kernels/elementwise.h"
#include "kernels/fp16.h"
#include "kernels/norm.h"
#include "kernels/quantize.h"
#include "kernels/rope.h"
#include "kernels/softmax.h"

namespace drift {
namespace {

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
    : model_(model), config_(model.config()), limits_(limits), isa_(model.isa()) {}

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
  f->rope_cache_.resize(c.rope_dims);
  // Build the kernels' lazily initialised tables now, so that no step allocates them.
  if (c.activation == Activation::kGeluTanh) (void)kernels::gelu_fp16_table();
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
      kernels::scale(isa_, row, config_.embedding_scale, row, config_.n_embd);
  }
}

void ForwardPass::matmul(const WeightMatrix& m, const float* x, int64_t x_stride, int64_t n_tokens,
                         float* y, int64_t y_stride, ThreadPool& pool) {
  kernels::quantize_activations(isa_, m.format, x, x_stride, n_tokens, m.cols, xq_.data(),
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
    kernels::rms_norm(isa_, &x_[t * c.n_embd], l.attn_norm.data, &xn_[t * xn_stride_], c.n_embd,
                      c.rms_eps);
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
      kernels::add(isa_, q, l.bq.data, q, c.q_dim());
      kernels::add(isa_, k, l.bk.data, k, c.kv_dim());
      kernels::add(isa_, v, l.bv.data, v, c.v_dim());
    }
    if (c.qk_norm) {
      for (int64_t h = 0; h < c.n_heads; ++h)
        kernels::rms_norm(isa_, q + h * c.head_dim, l.q_norm.data, q + h * c.head_dim, c.head_dim,
                          c.rms_eps);
      for (int64_t h = 0; h < c.n_kv_heads; ++h)
        kernels::rms_norm(isa_, k + h * c.head_dim, l.k_norm.data, k + h * c.head_dim, c.head_dim,
                          c.rms_eps);
    }
    kernels::RopeParams rope;
    rope.n_dims = c.rope_dims;
    rope.freq_base = lc.rope_base;
    rope.freq_scale = c.rope_freq_scale;
    kernels::rope_cache(rope, static_cast<int64_t>(pos), rope_cache_.data());
    const auto layout = c.rope_layout == RopeLayout::kAdjacent ? kernels::RopeLayout::kRopeNormal
                                                               : kernels::RopeLayout::kRopeNeox;
    kernels::rope_apply(isa_, layout, rope_cache_.data(), c.rope_dims, q, c.n_heads, c.head_dim);
    kernels::rope_apply(isa_, layout, rope_cache_.data(), c.rope_dims, k, c.n_kv_heads, c.head_dim);
    // Store this token's K and V (fp16) in its slot.
    const int64_t p = static_cast<int64_t>(pos);
    const int64_t page = s.page_table[p / kv.page_size()];
    const int64_t slot = p % kv.page_size();
    for (int64_t h = 0; h < c.n_kv_heads; ++h) {
      kernels::convert_f32_to_fp16(isa_, k + h * c.head_dim,
                                   kv.keys(page, il, h) + slot * c.head_dim, c.head_dim);
      kernels::convert_f32_to_fp16(isa_, v + h * c.head_dim_v,
                                   kv.values(page, il, h) + slot * c.head_dim_v, c.head_dim_v);
    }
  }

  attend(il, batch, kv, pool);

  const int64_t o_dim = c.n_heads * c.head_dim_v;
  matmul(l.wo, attn_out_.data(), o_dim, n, proj_.data(), c.n_embd, pool);
  for (int64_t t = 0; t < n; ++t) {
    float* o = &proj_[t * c.n_embd];
    if (c.post_norms) kernels::rms_norm(isa_, o, l.attn_post_norm.data, o, c.n_embd, c.rms_eps);
    kernels::add(isa_, &x_[t * c.n_embd], o, &x_[t * c.n_embd], c.n_embd);
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
      const int64_t n_seen = pos - first + 1;
      for (int64_t p = first; p <= pos; ++p) {
        const uint16_t* key =
            kv.keys(s.page_table[p / page_size], il, kvh) + (p % page_size) * c.head_dim;
        scores[p - first] = kernels::dot_f32_f16(isa_, q, key, c.head_dim) * c.attention_scale;
      }
      kernels::softmax(isa_, scores, scores, n_seen);
      float* out = &attn_out_[t * c.n_heads * c.head_dim_v + h * c.head_dim_v];
      std::fill(out, out + c.head_dim_v, 0.0f);
      for (int64_t p = first; p <= pos; ++p) {
        const uint16_t* value =
            kv.values(s.page_table[p / page_size], il, kvh) + (p % page_size) * c.head_dim_v;
        kernels::axpy_f16(isa_, scores[p - first], value, out, c.head_dim_v);
      }
    }
  });
}

void ForwardPass::ffn_block(int64_t il, int64_t n, ThreadPool& pool) {
  const LayerWeights& l = model_.weights().layers[il];
  const ModelConfig& c = config_;
  for (int64_t t = 0; t < n; ++t)
    kernels::rms_norm(isa_, &x_[t * c.n_embd], l.ffn_norm.data, &xn_[t * xn_stride_], c.n_embd,
                      c.rms_eps);
  matmul(l.ffn_gate, xn_.data(), xn_stride_, n, gate_.data(), c.n_ff, pool);
  matmul(l.ffn_up, xn_.data(), xn_stride_, n, up_.data(), c.n_ff, pool);
  for (int64_t t = 0; t < n; ++t) {
    const float* g = &gate_[t * c.n_ff];
    const float* u = &up_[t * c.n_ff];
    float* h = &xn_[t * xn_stride_];
    if (c.activation == Activation::kGeluTanh) {
      kernels::gelu(isa_, g, h, c.n_ff);
    } else {
      kernels::silu(isa_, g, h, c.n_ff);
    }
    kernels::mul(isa_, h, u, h, c.n_ff);
  }
  matmul(l.ffn_down, xn_.data(), xn_stride_, n, proj_.data(), c.n_embd, pool);
  for (int64_t t = 0; t < n; ++t) {
    float* o = &proj_[t * c.n_embd];
    if (c.post_norms) kernels::rms_norm(isa_, o, l.ffn_post_norm.data, o, c.n_embd, c.rms_eps);
    kernels::add(isa_, &x_[t * c.n_embd], o, &x_[t * c.n_embd], c.n_embd);
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
      kernels::rms_norm(isa_, &x_[t * c.n_embd], w.output_norm.data, &xn_[rows * xn_stride_],
                        c.n_embd, c.rms_eps);
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
