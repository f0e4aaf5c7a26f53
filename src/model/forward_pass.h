// The transformer forward pass over a batch of tokens with a paged KV cache. One object per
// executor: it owns every buffer a step needs, sized once for the largest batch, so that a step
// allocates nothing.
//
// Numerical contract: each token's hidden state, K/V and logits are computed by per-token
// operations with a fixed reduction order (matmuls per kernels/panel.h for the formats with panels,
// else kernels/matmul.h; attention per kernels/paged_attention.h), so a token's result does not
// depend on which other tokens or sequences share the batch, nor on where a prefill chunk starts.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/paged_attention.h"
#include "kernels/rope.h"
#include "model/expert_ffn.h"
#include "model/forward_batch.h"
#include "model/kv_pages.h"
#include "model/model.h"
#include "util/error.h"
#include "util/function_ref.h"
#include "util/thread_pool.h"

namespace drift {

struct ForwardLimits {
  int64_t max_tokens = 512;    // tokens per batch
  int64_t max_sequences = 64;  // sequences per batch (and logits rows)
  int64_t max_context = 8192;  // positions any sequence may reach
  int threads = 1;             // size of the thread pool run() will be given
};

class ForwardPass {
 public:
  static Expected<std::unique_ptr<ForwardPass>> create(const Model& model, ForwardLimits limits);

  // Runs the batch: writes each token's K/V into its page slots and writes logits rows
  // [row][n_vocab] in sequence order: one row (its last token) per sequence with want_logits, or
  // one row per token for a sequence with all_logits. `logits` must hold that many rows.
  // `hidden` gets the rows [row][n_embd] of the final normalised hidden states each sequence asks
  // for (n_hidden), in sequence order, and must hold that many. Validates the batch against the
  // limits first.
  Status run(const ForwardBatch& batch, KvPages& kv, ThreadPool& pool, std::span<float> logits,
             std::span<float> hidden = {});

  const ForwardLimits& limits() const { return limits_; }

  // Stores int4 keys as they are, without the offsets taken off them by default (key_offsets_):
  // for the measurements and tests that compare the two. Call before the first run.
  void disable_int4_key_offsets() {
    key_offsets_.clear();
    key_offsets_ready_ = true;
  }

 private:
  ForwardPass(const Model& model, ForwardLimits limits);

  Status validate(const ForwardBatch& batch, const KvPages& kv, std::span<float> logits,
                  std::span<float> hidden) const;
  Status validate_heads(const ForwardSequence& s) const;
  int64_t first_read_page(const ForwardSequence& s, int64_t group, const KvPages& kv) const;
  int64_t slot_of(const ForwardSequence& s, int64_t il, int64_t h, int64_t pos) const;
  int64_t first_visible_slot(const ForwardSequence& s, int64_t il, int64_t h, int64_t pos) const;
  void embed(const ForwardBatch& batch);
  void attention_block(int64_t il, const ForwardBatch& batch, KvPages& kv, ThreadPool& pool);
  // The last layer, for the tokens whose final state is read; returns the batch of those tokens,
  // whose rows of the buffers now come first (see output_batch).
  const ForwardBatch& last_layer(const ForwardBatch& batch, KvPages& kv, ThreadPool& pool);
  const ForwardBatch& output_batch(const ForwardBatch& batch);
  void project_and_store_kv(int64_t il, const ForwardBatch& batch, KvPages& kv, ThreadPool& pool);
  // The steps of attention_block, in order (t: a token of the batch; pos: its position).
  void project_qkv(const LayerWeights& l, int64_t n_tokens, ThreadPool& pool);
  void add_qkv_bias(const LayerWeights& l, int64_t t);
  void normalize_qk_heads(const LayerWeights& l, int64_t t);
  void rotate_qk(int64_t il, int64_t t, int64_t pos, float* rope_cache);
  kernels::RopeParams rope_params(int64_t il) const;
  kernels::RopeLayout rope_layout() const;  // the model's pair layout, in the kernels' terms
  void record_keys(int64_t t, int64_t il);
  void store_kv(int64_t il, int64_t t, const ForwardSequence& s, int64_t pos, KvPages& kv);
  void add_attention_output(const LayerWeights& l, int64_t n_tokens, ThreadPool& pool);
  void add_to_residual(const WeightVector& post_norm, int64_t n_tokens, ThreadPool& pool,
                       const WeightVector& bias = {});
  void ffn_block(int64_t il, int64_t n_tokens, ThreadPool& pool);
  void output_hidden(const ForwardBatch& batch, std::span<float> hidden);
  void output_logits(const ForwardBatch& batch, ThreadPool& pool, std::span<float> logits);
  // y[t][0..m.rows) = m x[t] for t < n_tokens (x: [n_tokens][m.cols], rows x_stride apart).
  void matmul(const WeightMatrix& m, const float* x, int64_t x_stride, int64_t n_tokens, float* y,
              int64_t y_stride, ThreadPool& pool);
  // Several matrices applied to the same input x: y_i[t][0..m_i.rows) = m_i x[t].
  struct MatmulOutput {
    const WeightMatrix* m;
    float* y;  // [n_tokens][y_stride]
    int64_t y_stride;
  };
  void matmuls(std::span<const MatmulOutput> outputs, const float* x, int64_t x_stride,
               int64_t n_tokens, ThreadPool& pool);
  bool can_share_input(std::span<const MatmulOutput> outputs) const;
  void quantize_input(const WeightMatrix& m, const float* x, int64_t x_stride, int64_t n_tokens,
                      ThreadPool& pool);
  void matmul_shared_input(std::span<const MatmulOutput> outputs, const float* x, int64_t x_stride,
                           int64_t n_tokens, ThreadPool& pool);
  // forward_key_offsets.cc: key_offsets_ from a calibration pass (first run with an int4 cache).
  Status calibrate_key_offsets(ThreadPool& pool);
  void attend(int64_t il, const ForwardBatch& batch, KvPages& kv, ThreadPool& pool);
  // A block of one sequence's queries over one KV head and the K/V it reads.
  struct AttentionBlock {
    kernels::PagedKv kv;
    kernels::AttentionQueries queries;
  };
  AttentionBlock attention_block_of(int64_t il, const ForwardSequence& s, KvPages& kv, int64_t kvh,
                                    int64_t q_begin, int64_t q_end, int64_t metric_from);
  // forward_decode_attention.cc: a lone decoding sequence's attention over a long context, every
  // KV head's block in parts dealt to every thread (kernels/paged_attention.h). False when the
  // batch does not take that path (attend() then runs it block by block).
  bool attend_decode_in_parts(int64_t il, const ForwardBatch& batch, KvPages& kv, ThreadPool& pool);
  // fn(begin, end, thread) over the token rows [0, n_tokens): split over the pool when there are
  // enough rows to pay for its barrier, else all on this thread (thread 0).
  void for_token_rows(int64_t n_tokens, ThreadPool& pool,
                      FunctionRef<void(int64_t, int64_t, int)> fn);

  const Model& model_;
  const ModelConfig& config_;
  const ForwardLimits limits_;
  const Isa isa_;

  // Activations; T = limits_.max_tokens.
  std::vector<float> x_;         // [T][n_embd] residual stream
  std::vector<float> xn_;        // [T][max(n_embd, dense_ff)] normalised input of the next matmul
  std::vector<float> q_;         // [T][q_dim]
  std::vector<float> k_;         // [T][kv_dim]
  std::vector<float> v_;         // [T][v_dim]
  std::vector<float> attn_out_;  // [T][n_heads * head_dim_v]
  std::vector<float> proj_;      // [T][n_embd] output of wo / ffn_down
  std::vector<float> gate_;      // [T][dense_ff] (empty for a mixture of experts)
  std::vector<float> up_;        // [T][dense_ff]
  std::unique_ptr<ExpertFeedForward> experts_;  // the feed-forward of a mixture of experts
  std::vector<uint8_t> xq_;    // [T][largest activation row] quantized matmul input
  std::vector<uint8_t> sums_;  // [T][sums_row_bytes_] per-block sums of xq_ for panel matmuls
  // [threads][scores_per_thread_] attention scratch (scores of every position for a block of
  // queries, converted K/V rows); attend() hands the kernel a 32-byte aligned start within it.
  std::vector<float> scores_;
  int64_t scores_per_thread_ = 0;
  // [threads][value_cache_rows_][head_dim_v]: each thread's value rows converted to fp32 during
  // one layer's attention (kernels::ValueRowCache).
  std::vector<float> value_cache_;
  int64_t value_cache_rows_ = 0;
  // Decode attention in parts: [n_kv_heads][decode_scores_per_head_] shared scores (64-byte
  // aligned blocks), [n_kv_heads][threads][kAttentionLanes] each part's maxima, and
  // [threads][decode_private_per_thread_] each thread's own scratch.
  std::vector<float> decode_scores_;
  int64_t decode_scores_per_head_ = 0;
  std::vector<float> decode_maxima_;
  std::vector<float> decode_private_;
  int64_t decode_private_per_thread_ = 0;
  std::vector<AttentionBlock> decode_blocks_;  // [n_kv_heads] one layer's blocks, for the passes
  std::vector<int64_t> token_sequence_;        // [T] index of each token's sequence in the batch
  // The batch of the tokens whose final state is read (output_batch), sized at creation.
  std::vector<int32_t> output_tokens_;             // [T]
  std::vector<ForwardSequence> output_sequences_;  // [max_sequences]
  ForwardBatch output_batch_;
  std::vector<float> rope_cache_;  // [threads][rope_dims] cos/sin of a thread's token and layer
  // int4 caches store each key minus a fixed offset per (layer, KV head, channel): the mean key
  // after RoPE (forward_key_offsets.cc). Softmax is unchanged by a logit added to every position a
  // query sees, and q . (k - o) = q . k - q . o, so attention reads the shifted keys as they are;
  // without the keys' large common part, their 4-bit rounding is finer (docs/design-notes.md).
  // [n_layers][kv_dim], empty until the first run with an int4 cache (or for models with sink
  // logits, whose extra softmax term a shift would change).
  std::vector<float> key_offsets_;
  bool key_offsets_ready_ = false;
  // While this pass calibrates another's offsets: every token's keys before RoPE,
  // [max_tokens][n_layers][kv_dim] (summed afterwards in token order, so that the offsets do not
  // depend on how the tokens were split over threads); empty otherwise.
  std::vector<float> recorded_keys_;
  int64_t xq_row_bytes_ = 0;
  int64_t sums_row_bytes_ = 0;
  int64_t xn_stride_ = 0;
  int64_t max_threads_ = 0;
};

}  // namespace drift
