#include "model/forward_pass.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/activation.h"
#include "kernels/dequantize.h"
#include "kernels/elementwise.h"
#include "kernels/fp16.h"
#include "kernels/kv_format.h"
#include "kernels/norm.h"
#include "kernels/paged_attention.h"
#include "kernels/panel.h"
#include "kernels/quantize.h"
#include "kernels/rope.h"

namespace drift {
namespace {

// Largest activation row any matrix of the model needs, so one buffer serves every matmul.
int64_t max_activation_row_bytes(const ModelWeights& w) {
  int64_t bytes = kernels::activation_row_bytes(w.output.format, w.output.cols);
  for (const LayerWeights& l : w.layers)
    for (const WeightMatrix* m : layer_matrices(l))
      bytes = std::max(bytes, kernels::activation_row_bytes(m->format, m->cols));
  return (bytes + 63) / 64 * 64;
}

// Largest per-token panel sums row (kernels/panel.h) of any matrix with panels.
int64_t max_panel_sums_row_bytes(const ModelWeights& w) {
  int64_t bytes = 0;
  auto consider = [&](const WeightMatrix& m) {
    if (m.has_panels()) bytes = std::max(bytes, kernels::panel_sums_row_bytes(m.format, m.cols));
  };
  consider(w.output);
  for (const LayerWeights& l : w.layers)
    for (const WeightMatrix* m : layer_matrices(l)) consider(*m);
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
  f->xn_stride_ = std::max(c.n_embd, c.dense_ff());
  f->x_.resize(T * c.n_embd);
  f->xn_.resize(T * f->xn_stride_);
  f->q_.resize(T * c.q_dim());
  f->k_.resize(T * c.kv_dim());
  f->v_.resize(T * c.v_dim());
  f->attn_out_.resize(T * c.n_heads * c.head_dim_v);
  f->proj_.resize(T * c.n_embd);
  f->gate_.resize(T * c.dense_ff());
  f->up_.resize(T * c.dense_ff());
  if (c.moe())
    f->experts_ = std::make_unique<ExpertFeedForward>(c, model.weights(), T, model.isa());
  f->xq_row_bytes_ = max_activation_row_bytes(model.weights());
  f->xq_.resize(T * f->xq_row_bytes_ + 64);
  f->sums_row_bytes_ = max_panel_sums_row_bytes(model.weights());
  f->sums_.resize(T * f->sums_row_bytes_ + 64);
  f->max_threads_ = limits.threads;
  // Attention scratch per thread, 32-byte aligned (kernels/paged_attention.h).
  const kernels::AttentionShape shape{c.head_dim, c.head_dim_v, c.attention_scale};
  f->scores_per_thread_ =
      (kernels::paged_attention_scratch_floats(shape, limits.max_context - 1) + 8 + 7) / 8 * 8;
  f->scores_.resize(static_cast<size_t>(limits.threads) * f->scores_per_thread_);
  f->value_cache_rows_ = kernels::paged_attention_value_cache_rows(shape, limits.max_context - 1);
  f->value_cache_.resize(static_cast<size_t>(limits.threads * f->value_cache_rows_ * c.head_dim_v));
  f->decode_scores_per_head_ =
      (kernels::decode_scores_floats(limits.max_context - 1) + 15) / 16 * 16;
  f->decode_scores_.resize(static_cast<size_t>(c.n_kv_heads * f->decode_scores_per_head_ + 16));
  f->decode_maxima_.resize(
      static_cast<size_t>(c.n_kv_heads * limits.threads * kernels::kAttentionLanes));
  f->decode_private_per_thread_ = (kernels::decode_private_floats(shape) + 15) / 16 * 16;
  f->decode_private_.resize(static_cast<size_t>(limits.threads * f->decode_private_per_thread_));
  f->decode_blocks_.resize(static_cast<size_t>(c.n_kv_heads));
  f->token_sequence_.resize(T);
  f->output_tokens_.resize(T);
  f->output_sequences_.resize(limits.max_sequences);
  f->rope_cache_.resize(static_cast<size_t>(limits.threads * c.rope_dims));
  // Build the kernels' lazily initialised tables now, so that no step allocates them.
  if (c.activation == Activation::kGeluTanh) (void)kernels::gelu_fp16_table();
  return f;
}

Status ForwardPass::validate(const ForwardBatch& batch, const KvPages& kv, std::span<float> logits,
                             std::span<float> hidden) const {
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  if (n < 1 || n > limits_.max_tokens)
    return make_error("batch has {} tokens, expected 1 to {}", n, limits_.max_tokens);
  if (batch.sequences.empty() ||
      static_cast<int64_t>(batch.sequences.size()) > limits_.max_sequences)
    return make_error("batch has {} sequences, expected 1 to {}", batch.sequences.size(),
                      limits_.max_sequences);
  int64_t expected_begin = 0, n_logits = 0, n_hidden = 0;
  for (const ForwardSequence& s : batch.sequences) {
    if (s.token_begin != expected_begin || s.n_tokens < 1)
      return make_error("batch sequences must cover the tokens in order without gaps");
    expected_begin += s.n_tokens;
    if (s.start_pos < 0 || s.start_pos + s.n_tokens > limits_.max_context)
      return make_error("positions [{}, {}) exceed the context limit {}", s.start_pos,
                        s.start_pos + s.n_tokens, limits_.max_context);
    DRIFT_RETURN_IF_ERROR(validate_heads(s));
    // Slots the sequence fills: one per position, or per entry of its longest head; a page list
    // per KV group, kNoPage allowed only where no query of a sliding group reads.
    const int64_t slots = (s.heads ? s.heads->max_length() : s.start_pos) + s.n_tokens;
    const int64_t needed_pages = (slots + kv.page_size() - 1) / kv.page_size();
    const auto groups = static_cast<size_t>(kv.num_groups());
    const size_t per_group = s.page_table.size() / groups;
    if (s.page_table.size() % groups != 0 || static_cast<int64_t>(per_group) < needed_pages)
      return make_error("page table has {} pages for {} groups, {} a group needed for slot {}",
                        s.page_table.size(), groups, needed_pages, slots - 1);
    for (size_t g = 0; g < groups; ++g) {
      const int64_t first_read = first_read_page(s, int64_t(g), kv);
      for (int64_t i = 0; i < needed_pages; ++i) {
        const int32_t page = s.page_table[g * per_group + size_t(i)];
        if (page == -1 && i < first_read) continue;  // freed below a sliding window
        if (page < 0 || page >= kv.num_pages())
          return make_error("page id {} (group {}, page {}) is outside the KV cache's {} pages",
                            page, g, i, kv.num_pages());
      }
    }
    n_logits += s.all_logits ? s.n_tokens : s.want_logits ? 1 : 0;
    if (s.n_hidden < 0 || s.hidden_begin < 0 || s.hidden_begin + s.n_hidden > s.n_tokens)
      return make_error("hidden rows [{}, {}) are outside the sequence's {} tokens", s.hidden_begin,
                        s.hidden_begin + s.n_hidden, s.n_tokens);
    n_hidden += s.n_hidden;
  }
  if (expected_begin != n)
    return make_error("batch sequences cover {} of {} tokens", expected_begin, n);
  for (int32_t token : batch.tokens)
    if (token < 0 || token >= config_.n_vocab)
      return make_error("token id {} is outside the vocabulary of {}", token, config_.n_vocab);
  if (static_cast<int64_t>(logits.size()) < n_logits * config_.n_vocab)
    return make_error("logits buffer holds {} floats, {} needed", logits.size(),
                      n_logits * config_.n_vocab);
  if (static_cast<int64_t>(hidden.size()) < n_hidden * config_.n_embd)
    return make_error("hidden-state buffer holds {} floats, {} needed", hidden.size(),
                      n_hidden * config_.n_embd);
  return Status::Ok();
}

// The first page of group `group` that the sequence's queries read: that of the first slot any
// of its sliding layers sees from the batch's first position (0 if a layer attends to all).
int64_t ForwardPass::first_read_page(const ForwardSequence& s, int64_t group,
                                     const KvPages& kv) const {
  int64_t first = -1;
  for (int64_t il = 0; il < config_.n_layers; ++il) {
    if (kv.group_of(il) != group) continue;
    if (!config_.layers[il].sliding_window) return 0;
    for (int64_t h = 0; h < (s.heads ? config_.n_kv_heads : 1); ++h) {
      const int64_t slot = first_visible_slot(s, il, h, s.start_pos);
      first = first < 0 ? slot : std::min(first, slot);
    }
  }
  return std::max<int64_t>(0, first) / kv.page_size();
}

// A compressed sequence's table matches the model and has room for the batch's tokens.
Status ForwardPass::validate_heads(const ForwardSequence& s) const {
  if (s.metric_tokens < 0 || s.metric_tokens > s.n_tokens)
    return make_error("metric tokens {} outside the sequence's {} tokens", s.metric_tokens,
                      s.n_tokens);
  if (s.heads == nullptr) {
    if (s.metric_tokens > 0) return make_error("metric tokens need a KV head table");
    return Status::Ok();
  }
  if (s.heads->n_layers() != config_.n_layers || s.heads->n_kv_heads() != config_.n_kv_heads)
    return make_error("KV head table of {} layers x {} heads, the model has {} x {}",
                      s.heads->n_layers(), s.heads->n_kv_heads(), config_.n_layers,
                      config_.n_kv_heads);
  if (s.heads->max_length() + s.n_tokens > std::min(s.heads->capacity(), limits_.max_context))
    return make_error("KV head table holds {} entries, {} more exceed its capacity {}",
                      s.heads->max_length(), s.n_tokens,
                      std::min(s.heads->capacity(), limits_.max_context));
  return Status::Ok();
}

Status ForwardPass::run(const ForwardBatch& batch, KvPages& kv, ThreadPool& pool,
                        std::span<float> logits, std::span<float> hidden) {
  DRIFT_RETURN_IF_ERROR(validate(batch, kv, logits, hidden));
  if (kv.format() == kernels::KvFormat::kInt4 && !key_offsets_ready_)
    DRIFT_RETURN_IF_ERROR(calibrate_key_offsets(pool));
  if (pool.size() > max_threads_)
    return make_error("thread pool of {} is larger than the {} threads the pass was sized for",
                      pool.size(), max_threads_);
  const int64_t n_tokens = static_cast<int64_t>(batch.tokens.size());
  for (size_t s = 0; s < batch.sequences.size(); ++s)
    for (int64_t i = 0; i < batch.sequences[s].n_tokens; ++i)
      token_sequence_[batch.sequences[s].token_begin + i] = static_cast<int64_t>(s);

  // A compressed sequence's tokens take the next slot of every head (validated to fit).
  for (const ForwardSequence& s : batch.sequences)
    if (s.heads) s.heads->append(s.start_pos, s.n_tokens);
  embed(batch);
  for (int64_t il = 0; il + 1 < config_.n_layers; ++il) {
    attention_block(il, batch, kv, pool);
    ffn_block(il, n_tokens, pool);
  }
  const ForwardBatch& out = last_layer(batch, kv, pool);
  output_hidden(out, hidden);
  output_logits(out, pool, logits);
  return Status::Ok();
}

// Every token's K/V of the last layer is stored (later steps attend to it), but only the tokens
// whose logits or hidden states are read need the layer's attention, output projection and
// feed-forward: in a prefill chunk, its last token (or none, before the prompt's end) instead of
// all. llama.cpp skips them too (its graph keeps the output rows before the last layer's
// attention output). A token's result does not depend on the others in the batch, so the kept
// tokens' results are unchanged.
const ForwardBatch& ForwardPass::last_layer(const ForwardBatch& batch, KvPages& kv,
                                            ThreadPool& pool) {
  const int64_t il = config_.n_layers - 1;
  const LayerWeights& l = model_.weights().layers[il];
  project_and_store_kv(il, batch, kv, pool);
  const ForwardBatch& out = output_batch(batch);
  const int64_t n = static_cast<int64_t>(out.tokens.size());
  if (n == 0) return out;
  attend(il, out, kv, pool);
  add_attention_output(l, n, pool);
  ffn_block(il, n, pool);
  return out;
}

// The batch of the tokens whose final state is read: per sequence, the suffix of its tokens from
// the first one whose logits or hidden state it asks for (all of a compressed sequence, whose
// queries feed its metric); their rows of q_ and x_ move to the front, in order. Returns `batch`
// itself when every token is kept (a decode step).
const ForwardBatch& ForwardPass::output_batch(const ForwardBatch& batch) {
  const ModelConfig& c = config_;
  auto kept_from = [](const ForwardSequence& s) {
    if (s.all_logits || s.heads != nullptr || s.metric_tokens > 0) return int64_t{0};
    int64_t from = s.want_logits ? s.n_tokens - 1 : s.n_tokens;
    if (s.n_hidden > 0) from = std::min(from, s.hidden_begin);
    return from;
  };
  bool all_kept = true;
  for (const ForwardSequence& s : batch.sequences) all_kept &= kept_from(s) == 0;
  if (all_kept) return batch;

  int64_t n_out = 0, n_seq = 0;
  for (const ForwardSequence& s : batch.sequences) {
    const int64_t from = kept_from(s);
    if (from == s.n_tokens) continue;
    ForwardSequence& o = output_sequences_[n_seq++];
    o = s;
    o.token_begin = n_out;
    o.n_tokens = s.n_tokens - from;
    o.start_pos = s.start_pos + from;
    o.hidden_begin = s.n_hidden > 0 ? s.hidden_begin - from : 0;
    for (int64_t i = from; i < s.n_tokens; ++i, ++n_out) {
      const int64_t t = s.token_begin + i;
      output_tokens_[n_out] = batch.tokens[t];
      if (t == n_out) continue;  // rows move only toward the front, so each source is intact
      std::memmove(&q_[n_out * c.q_dim()], &q_[t * c.q_dim()], c.q_dim() * sizeof(float));
      std::memmove(&x_[n_out * c.n_embd], &x_[t * c.n_embd], c.n_embd * sizeof(float));
    }
  }
  output_batch_.tokens = std::span<const int32_t>(output_tokens_.data(), n_out);
  output_batch_.sequences = std::span<const ForwardSequence>(output_sequences_.data(), n_seq);
  return output_batch_;
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
  const MatmulOutput out{&m, y, y_stride};
  matmul_shared_input({&out, 1}, x, x_stride, n_tokens, pool);
}

// One quantization of x and one pass of the pool for every matrix: Q, K and V (or gate and up)
// read the same input, so they share its quantized rows, its panel sums and a single barrier; the
// threads split the concatenated panels (or 16-row groups) of all matrices evenly.
void ForwardPass::matmul_shared_input(std::span<const MatmulOutput> outputs, const float* x,
                                      int64_t x_stride, int64_t n_tokens, ThreadPool& pool) {
  const WeightMatrix& first = *outputs[0].m;
  quantize_input(first, x, x_stride, n_tokens, pool);
  int64_t total_units = 0;  // panels, or 16-row groups of row-layout matrices
  for (const MatmulOutput& o : outputs) total_units += (o.m->rows + 15) / 16;
  pool.run([&](int index, int count) {
    const Range work = split_range(total_units, index, count);
    int64_t base = 0;
    for (const MatmulOutput& o : outputs) {
      const WeightMatrix& m = *o.m;
      const int64_t units = (m.rows + 15) / 16;
      const int64_t begin = std::max(work.begin - base, int64_t{0});
      const int64_t end = std::min(work.end - base, units);
      base += units;
      if (begin >= end) continue;
      if (m.has_panels()) {
        const kernels::PanelArgs args{m.panels,      m.rows,       m.cols,          xq_.data(),
                                      xq_row_bytes_, sums_.data(), sums_row_bytes_, o.y,
                                      o.y_stride,    n_tokens};
        m.panel_matmul(args, begin, end);
      } else {
        const kernels::MatmulArgs args{m.data, m.row_bytes, xq_.data(), xq_row_bytes_,
                                       o.y,    o.y_stride,  m.cols,     n_tokens};
        m.matmul(args, std::min(m.rows, begin * 16), std::min(m.rows, end * 16));
      }
    }
  });
}

// Quantizes x for `m` (and its panel sums) into xq_ / sums_. A batch of many tokens is split over
// the pool (one more barrier, but the rows are independent and otherwise a serial tail of every
// matmul); a few tokens are done on this thread.
void ForwardPass::quantize_input(const WeightMatrix& m, const float* x, int64_t x_stride,
                                 int64_t n_tokens, ThreadPool& pool) {
  auto rows = [&](int64_t begin, int64_t end) {
    if (begin >= end) return;
    kernels::quantize_activations(isa_, m.format, x + begin * x_stride, x_stride, end - begin,
                                  m.cols, xq_.data() + begin * xq_row_bytes_, xq_row_bytes_);
    if (m.has_panels())
      kernels::prepare_panel_sums(m.format, xq_.data() + begin * xq_row_bytes_, xq_row_bytes_,
                                  end - begin, m.cols, sums_.data() + begin * sums_row_bytes_,
                                  sums_row_bytes_);
  };
  for_token_rows(n_tokens, pool, [&](int64_t begin, int64_t end, int) { rows(begin, end); });
}

void ForwardPass::for_token_rows(int64_t n_tokens, ThreadPool& pool,
                                 FunctionRef<void(int64_t, int64_t, int)> fn) {
  constexpr int64_t kParallelRows = 16;
  if (n_tokens < kParallelRows || pool.size() == 1) return fn(0, n_tokens, 0);
  pool.run([&](int index, int count) {
    const Range r = split_range(n_tokens, index, count);
    if (r.begin < r.end) fn(r.begin, r.end, index);
  });
}

// Whether matrices can share one quantized input: same activation format and columns, and all or
// none with panels (the panel sums are prepared for the first).
bool ForwardPass::can_share_input(std::span<const MatmulOutput> outputs) const {
  const WeightMatrix& first = *outputs[0].m;
  for (const MatmulOutput& o : outputs) {
    if (o.m->cols != first.cols || o.m->has_panels() != first.has_panels() ||
        kernels::format_info(o.m->format).activation !=
            kernels::format_info(first.format).activation)
      return false;
  }
  return true;
}

void ForwardPass::matmuls(std::span<const MatmulOutput> outputs, const float* x, int64_t x_stride,
                          int64_t n_tokens, ThreadPool& pool) {
  if (can_share_input(outputs)) return matmul_shared_input(outputs, x, x_stride, n_tokens, pool);
  for (const MatmulOutput& o : outputs) matmul(*o.m, x, x_stride, n_tokens, o.y, o.y_stride, pool);
}

// The attention half of a layer, as a list of named steps (the layer of gemma.cpp reads so).
void ForwardPass::attention_block(int64_t il, const ForwardBatch& batch, KvPages& kv,
                                  ThreadPool& pool) {
  const LayerWeights& l = model_.weights().layers[il];
  project_and_store_kv(il, batch, kv, pool);
  attend(il, batch, kv, pool);
  add_attention_output(l, static_cast<int64_t>(batch.tokens.size()), pool);
}

// q, k, v of every token, normed and rotated as the model asks; k and v stored in the pages.
void ForwardPass::project_and_store_kv(int64_t il, const ForwardBatch& batch, KvPages& kv,
                                       ThreadPool& pool) {
  const LayerWeights& l = model_.weights().layers[il];
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  project_qkv(l, n, pool);
  for_token_rows(n, pool, [&](int64_t begin, int64_t end, int thread) {
    float* rope_cache = &rope_cache_[static_cast<size_t>(thread * config_.rope_dims)];
    for (int64_t t = begin; t < end; ++t) {
      const ForwardSequence& s = batch.sequences[token_sequence_[t]];
      const int64_t pos = s.start_pos + (t - s.token_begin);
      add_qkv_bias(l, t);
      normalize_qk_heads(l, t);
      if (!recorded_keys_.empty()) record_keys(t, il);
      rotate_qk(il, t, pos, rope_cache);
      store_kv(il, t, s, pos, kv);  // each token its own slot: threads never share a write
    }
  });
}

// q, k, v of every token: the normed input times Wq, Wk, Wv (one shared quantized input).
void ForwardPass::project_qkv(const LayerWeights& l, int64_t n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  for_token_rows(n, pool, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t)
      kernels::rms_norm(isa_, &x_[t * c.n_embd], l.attn_norm.data, &xn_[t * xn_stride_], c.n_embd,
                        c.rms_eps);
  });
  const MatmulOutput qkv[] = {
      {&l.wq, q_.data(), c.q_dim()}, {&l.wk, k_.data(), c.kv_dim()}, {&l.wv, v_.data(), c.v_dim()}};
  matmuls(qkv, xn_.data(), xn_stride_, n, pool);
}

// qwen2's biases on the q, k and v projections.
void ForwardPass::add_qkv_bias(const LayerWeights& l, int64_t t) {
  const ModelConfig& c = config_;
  if (!c.qkv_bias) return;
  kernels::add(isa_, &q_[t * c.q_dim()], l.bq.data, &q_[t * c.q_dim()], c.q_dim());
  kernels::add(isa_, &k_[t * c.kv_dim()], l.bk.data, &k_[t * c.kv_dim()], c.kv_dim());
  kernels::add(isa_, &v_[t * c.v_dim()], l.bv.data, &v_[t * c.v_dim()], c.v_dim());
}

// gemma3's and qwen3's RMSNorm over each q and k head, before RoPE.
void ForwardPass::normalize_qk_heads(const LayerWeights& l, int64_t t) {
  const ModelConfig& c = config_;
  if (!c.qk_norm) return;
  float* q = &q_[t * c.q_dim()];
  float* k = &k_[t * c.kv_dim()];
  for (int64_t h = 0; h < c.n_heads; ++h)
    kernels::rms_norm(isa_, q + h * c.head_dim, l.q_norm.data, q + h * c.head_dim, c.head_dim,
                      c.rms_eps);
  for (int64_t h = 0; h < c.n_kv_heads; ++h)
    kernels::rms_norm(isa_, k + h * c.head_dim, l.k_norm.data, k + h * c.head_dim, c.head_dim,
                      c.rms_eps);
}

// RoPE of token t's q and k heads at position `pos`, with the layer's base (gemma3's local
// layers differ) and the model's frequency factors, if any.
kernels::RopeParams ForwardPass::rope_params(int64_t il) const {
  const ModelConfig& c = config_;
  kernels::RopeParams rope;
  rope.n_dims = c.rope_dims;
  rope.freq_base = c.layers[il].rope_base;
  rope.freq_scale = c.rope_freq_scale;
  rope.freq_factors = model_.weights().rope_freqs.data;  // nullptr unless the file has them
  rope.attn_factor = c.rope_attn_factor;
  rope.ext_factor = c.rope_ext_factor;
  rope.corr_dims[0] = c.layers[il].rope_corr_dims[0];
  rope.corr_dims[1] = c.layers[il].rope_corr_dims[1];
  return rope;
}

kernels::RopeLayout ForwardPass::rope_layout() const {
  return config_.rope_layout == RopeLayout::kAdjacent ? kernels::RopeLayout::kRopeNormal
                                                      : kernels::RopeLayout::kRopeNeox;
}

void ForwardPass::rotate_qk(int64_t il, int64_t t, int64_t pos, float* rope_cache) {
  const ModelConfig& c = config_;
  kernels::rope_cache(rope_params(il), pos, rope_cache);
  const kernels::RopeLayout layout = rope_layout();
  kernels::rope_apply(isa_, layout, rope_cache, c.rope_dims, &q_[t * c.q_dim()], c.n_heads,
                      c.head_dim);
  kernels::rope_apply(isa_, layout, rope_cache, c.rope_dims, &k_[t * c.kv_dim()], c.n_kv_heads,
                      c.head_dim);
}

// Stores token t's K and V in its slot, in the cache's format (kernels/kv_format.h: keys in a
// column of the transposed block; int8/int4 quantized with the slot's scales).
void ForwardPass::store_kv(int64_t il, int64_t t, const ForwardSequence& s, int64_t pos,
                           KvPages& kv) {
  const ModelConfig& c = config_;
  float* k = &k_[t * c.kv_dim()];
  const float* v = &v_[t * c.v_dim()];
  if (kv.format() == kernels::KvFormat::kInt4 && !key_offsets_.empty()) {
    const float* offset = &key_offsets_[il * c.kv_dim()];
    for (int64_t i = 0; i < c.kv_dim(); ++i) k[i] -= offset[i];
  }
  const std::span<const int32_t> pages = kv.layer_pages(s.page_table, il);
  for (int64_t h = 0; h < c.n_kv_heads; ++h) {
    const int64_t at = slot_of(s, il, h, pos);
    const int64_t page = pages[at / kv.page_size()];
    const int64_t slot = at % kv.page_size();
    kernels::kv_store_key(isa_, kv.format(), kv.keys(page, il, h), c.head_dim, kv.page_size(), slot,
                          k + h * c.head_dim);
    kernels::kv_store_value(isa_, kv.format(), kv.values(page, il, h), c.head_dim_v, kv.page_size(),
                            slot, v + h * c.head_dim_v);
  }
}

// The slot of head h of layer il that holds position `pos` of the batch's tokens: its position,
// or, in a compressed sequence, the slot after the entries the head held before the batch (the
// table already lists the batch's tokens).
int64_t ForwardPass::slot_of(const ForwardSequence& s, int64_t il, int64_t h, int64_t pos) const {
  if (s.heads == nullptr) return pos;
  return s.heads->length(il, h) - s.n_tokens + (pos - s.start_pos);
}

// The first slot of head h that a query at `pos` sees in a sliding-window layer: the first entry
// at a position >= pos - window + 1 (entries are in increasing position).
int64_t ForwardPass::first_visible_slot(const ForwardSequence& s, int64_t il, int64_t h,
                                        int64_t pos) const {
  const int64_t from = pos - config_.sliding_window + 1;
  if (s.heads == nullptr) return std::max<int64_t>(0, from);
  const std::span<const int32_t> positions = s.heads->positions(il, h);
  return std::lower_bound(positions.begin(), positions.end(), from) - positions.begin();
}

// x += Wo (attention output) (gpt-oss: plus its bias; gemma3: normed first).
void ForwardPass::add_attention_output(const LayerWeights& l, int64_t n, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const int64_t o_dim = c.n_heads * c.head_dim_v;
  matmul(l.wo, attn_out_.data(), o_dim, n, proj_.data(), c.n_embd, pool);
  add_to_residual(l.attn_post_norm, n, pool, l.bo);
}

// x += proj_ for every token (gpt-oss: proj_ plus `bias` first; gemma3: proj_ normed by
// `post_norm` first).
void ForwardPass::add_to_residual(const WeightVector& post_norm, int64_t n, ThreadPool& pool,
                                  const WeightVector& bias) {
  const ModelConfig& c = config_;
  for_token_rows(n, pool, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      float* o = &proj_[t * c.n_embd];
      if (bias.present()) kernels::add(isa_, o, bias.data, o, c.n_embd);
      if (c.post_norms) kernels::rms_norm(isa_, o, post_norm.data, o, c.n_embd, c.rms_eps);
      kernels::add(isa_, &x_[t * c.n_embd], o, &x_[t * c.n_embd], c.n_embd);
    }
  });
}

// softmax(q . K^T * scale) V for every (token, head), over the positions the token may see:
// [0, pos] or, in a sliding-window layer, the last `sliding_window` of them. The work items are
// blocks of up to kAttentionLanes queries — the (token, head) pairs of one sequence whose heads
// share one KV head — so each K/V row read serves all of them (kernels/paged_attention.h; a
// query's result does not depend on its block, so the batch does not change it).
// The block of a sequence's queries [q_begin, q_end) over KV head kvh (token i of the sequence,
// head kvh * group + g, in order of i * group + g) and the K/V they read.
ForwardPass::AttentionBlock ForwardPass::attention_block_of(int64_t il, const ForwardSequence& s,
                                                            KvPages& kv, int64_t kvh,
                                                            int64_t q_begin, int64_t q_end,
                                                            int64_t metric_from) {
  const ModelConfig& c = config_;
  const int64_t group = c.n_heads / c.n_kv_heads;
  const bool sliding = c.layers[il].sliding_window;
  const float* sinks = model_.weights().layers[il].attn_sinks.data;  // [n_heads], or none
  AttentionBlock b{
      kernels::PagedKv{kv.keys(0, il, kvh), kv.values(0, il, kvh), kv.page_stride(), kv.page_size(),
                       kv.layer_pages(s.page_table, il).data(), kv.format()},
      {}};
  kernels::AttentionQueries& queries = b.queries;
  queries.has_sinks = sinks != nullptr;
  queries.n = q_end - q_begin;
  for (int64_t qi = q_begin; qi < q_end; ++qi) {
    const int64_t i = qi / group, h = kvh * group + qi % group;
    const int64_t t = s.token_begin + i;
    const int64_t pos = s.start_pos + i;
    const int64_t lane = qi - q_begin;
    queries.q[lane] = &q_[t * c.q_dim() + h * c.head_dim];
    queries.first[lane] = sliding ? first_visible_slot(s, il, kvh, pos) : 0;
    queries.last[lane] = slot_of(s, il, kvh, pos);
    queries.out[lane] = &attn_out_[t * c.n_heads * c.head_dim_v + h * c.head_dim_v];
    if (qi >= metric_from) queries.metric_lanes |= 1u << lane;
    if (sinks != nullptr) queries.sink[lane] = sinks[h];  // gpt-oss: the head's sink logit
  }
  return b;
}

void ForwardPass::attend(int64_t il, const ForwardBatch& batch, KvPages& kv, ThreadPool& pool) {
  if (attend_decode_in_parts(il, batch, kv, pool)) return;
  const ModelConfig& c = config_;
  const int64_t group = c.n_heads / c.n_kv_heads;
  const kernels::AttentionShape shape{c.head_dim, c.head_dim_v, c.attention_scale};
  constexpr int64_t kLanes = kernels::kAttentionLanes;
  auto blocks_of = [&](const ForwardSequence& s) {
    return c.n_kv_heads * ((s.n_tokens * group + kLanes - 1) / kLanes);
  };
  auto run_blocks = [&](int index, int count) {
    float* scratch = reinterpret_cast<float*>(
        (reinterpret_cast<uintptr_t>(&scores_[static_cast<size_t>(index) * scores_per_thread_]) +
         31) /
        32 * 32);
    // This thread's converted value rows, empty at each layer's start (the KV just changed).
    kernels::ValueRowCache value_rows{
        &value_cache_[static_cast<size_t>(index * value_cache_rows_ * c.head_dim_v)],
        value_cache_rows_};
    // Blocks are dealt out in turn (block b to thread b mod count), not in contiguous ranges:
    // a block's cost grows with its tokens' positions, so in a prefill the last range would
    // hold the most expensive blocks (with 2 threads, 3/4 of the work) and the others would
    // wait for it at the barrier. The blocks that add to a head's metric all go to one thread
    // (that of the head's first block), in order, so that no two threads add to one sum and the
    // sums do not depend on the thread count.
    int64_t base = 0;
    for (const ForwardSequence& s : batch.sequences) {
      const int64_t n_blocks = blocks_of(s);
      const int64_t per_head = n_blocks / c.n_kv_heads;
      // Queries from this one on (in the order below) add to the metric.
      const int64_t metric_from = (s.n_tokens - s.metric_tokens) * group;
      for (int64_t item = 0; item < n_blocks; ++item) {
        const int64_t kvh = item / per_head, block = item % per_head;
        const bool adds_metric = s.metric_tokens > 0 && (block + 1) * kLanes > metric_from;
        const int64_t owner = adds_metric ? base + kvh * per_head : base + item;
        if (owner % count != index) continue;
        const int64_t q_begin = block * kLanes;
        const int64_t q_end = std::min(q_begin + kLanes, s.n_tokens * group);
        AttentionBlock b = attention_block_of(il, s, kv, kvh, q_begin, q_end, metric_from);
        if (adds_metric) b.queries.metric = s.heads->metric_sums(il, kvh);
        kernels::paged_attention(isa_, shape, b.kv, b.queries, scratch, &value_rows);
      }
      base += n_blocks;
    }
  };
  // One block (a single sequence's decode over one KV head, as gpt-oss's synthetic model has)
  // leaves a second thread nothing to do: run it here rather than wake the pool.
  int64_t total_blocks = 0;
  for (const ForwardSequence& s : batch.sequences) total_blocks += blocks_of(s);
  if (total_blocks == 1) {
    run_blocks(0, 1);
  } else {
    pool.run(run_blocks);
  }
}

void ForwardPass::ffn_block(int64_t il, int64_t n, ThreadPool& pool) {
  const LayerWeights& l = model_.weights().layers[il];
  const ModelConfig& c = config_;
  for_token_rows(n, pool, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t)
      kernels::rms_norm(isa_, &x_[t * c.n_embd], l.ffn_norm.data, &xn_[t * xn_stride_], c.n_embd,
                        c.rms_eps);
  });
  if (experts_) {
    experts_->run(l, xn_.data(), xn_stride_, n, proj_.data(), c.n_embd, pool);
    return add_to_residual(l.ffn_post_norm, n, pool);
  }
  const MatmulOutput gate_up[] = {{&l.ffn_gate, gate_.data(), c.n_ff},
                                  {&l.ffn_up, up_.data(), c.n_ff}};
  matmuls(gate_up, xn_.data(), xn_stride_, n, pool);
  for_token_rows(n, pool, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
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
  });
  matmul(l.ffn_down, xn_.data(), xn_stride_, n, proj_.data(), c.n_embd, pool);
  add_to_residual(l.ffn_post_norm, n, pool);
}

// The final normalised hidden state of each token a sequence asks for: what output_logits feeds
// the LM head, computed by the same per-token norm.
void ForwardPass::output_hidden(const ForwardBatch& batch, std::span<float> hidden) {
  const ModelConfig& c = config_;
  int64_t row = 0;
  for (const ForwardSequence& s : batch.sequences) {
    for (int64_t i = s.hidden_begin; i < s.hidden_begin + s.n_hidden; ++i, ++row) {
      const int64_t t = s.token_begin + i;
      kernels::rms_norm(isa_, &x_[t * c.n_embd], model_.weights().output_norm.data,
                        &hidden[row * c.n_embd], c.n_embd, c.rms_eps);
    }
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
