// The CPU executor: runs a StepPlan as one forward pass of the model over the paged KV cache,
// samples the next token of every item that asks for one (verifying a decode item's drafts
// position by position), and pools the final hidden states of embedding items. It owns the KV
// memory, the forward workspace, the compute thread pool and the samplers' scratch, all sized at
// creation, so that a step allocates nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "executor/kv_compressor.h"
#include "model/forward_pass.h"
#include "model/kv_head_table.h"
#include "model/kv_pages.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "scheduler/executor.h"
#include "util/thread_pool.h"

namespace drift {

struct CpuExecutorConfig {
  int threads = 1;         // compute threads, the engine worker included
  int64_t num_pages = 0;   // KV pages (the KV cache manager hands out ids below this)
  int64_t page_size = 16;  // tokens per page
  kernels::KvFormat kv_format = kernels::KvFormat::kF16;  // element type of stored K/V
  int64_t max_batch_tokens = 512;
  int64_t max_batch_sequences = 64;
  int64_t max_context = 4096;
  // Speculative decoding: the most draft tokens a plan carries (SpecConfig::
  // max_plan_draft_tokens), each of which needs a logits row of its own.
  int64_t max_draft_tokens = 0;
  // KV-Compress's policy and windows; how much each sequence keeps comes with each plan.
  KvCompressConfig kv_compress;
  // Each layer's KV group and slot in a page (kv/kv_groups.h); empty: one group of every layer.
  KvLayerPlacement kv_placement;
};

class CpuExecutor final : public Executor, private KVPageMemory {
 public:
  // `model` must outlive the executor.
  static Expected<std::unique_ptr<CpuExecutor>> create(const Model& model,
                                                       const CpuExecutorConfig& config);

  Status run(const StepPlan& plan, ExecutionResult& result) override;
  bool healthy() const override { return healthy_; }
  KVPageMemory* page_memory() override { return this; }

  const Model& model() const { return model_; }
  ThreadPool& pool() { return pool_; }

 private:
  CpuExecutor(const Model& model, const CpuExecutorConfig& config, KvPages kv,
              std::unique_ptr<ForwardPass> forward);
  Status run_step(const StepPlan& plan, ExecutionResult& result);
  // KVPageMemory: a page is one contiguous run of the KV memory (model/kv_pages.h).
  uint64_t page_bytes() const override { return uint64_t(kv_.page_stride()); }
  std::span<uint8_t> page(PageId page) override { return kv_.page_bytes(page); }
  // Samples the `index`-th sampled item (logit_row_item_[index], whose logits rows start at
  // logit_first_row_[index]) with thread `thread`'s scratch: its one token, or its drafts'
  // verdict and the token after the accepted ones.
  void sample_item(const StepPlan& plan, int64_t index, int thread, ExecutionResult& result);
  // One position's token from logits row `row`, sampled as a decode after `history` would be,
  // masked by `constraint` (null: none) at that position, with its logprobs into `logprobs` when
  // the item asks for them. -1 after recording an error in `result`.
  int32_t sample_position(const StepItem& item, int64_t row, std::span<const int32_t> history,
                          TokenConstraint* constraint, int thread, ItemResult& result,
                          std::optional<TokenLogprobs>& logprobs);
  Status validate_drafts(const StepPlan& plan) const;
  // Folds the hidden-state rows of embedding items into their vectors (executor/pooling.h).
  void pool_embeddings(const StepPlan& plan, ExecutionResult& result);
  // KV-Compress: the per-head table of a compressed item's sequence, made at its first item (its
  // slots [0, kv_slots) then hold positions [0, kv_slots)); an error if the table disagrees with
  // the plan. And the plan's compressions, after the forward pass.
  Expected<KvHeadTable*> kv_table_for(const StepItem& item);
  Status compress_kv(const StepPlan& plan);

  const Model& model_;
  CpuExecutorConfig config_;
  ThreadPool pool_;
  KvPages kv_;
  std::unique_ptr<ForwardPass> forward_;
  std::vector<ForwardSequence> sequences_;  // [max_batch_sequences]
  std::vector<float> logits_;               // [max_batch_sequences + max_draft_tokens][n_vocab]
  std::vector<int64_t> logit_row_item_;     // [max_batch_sequences] each sampled item
  std::vector<int64_t> logit_first_row_;    // [max_batch_sequences] its first logits row
  std::vector<float> hidden_;               // [max_batch_tokens][n_embd] rows embeddings pool
  // Per compute thread: the sampler's scratch and a [n_vocab] copy of the raw logits for logprobs.
  std::vector<SamplerScratch> sampler_scratch_;
  std::vector<std::vector<float>> logprob_rows_;
  // Per compute thread: the allowed-token mask of a constrained row, [token_mask_words(n_vocab)].
  std::vector<std::vector<uint32_t>> mask_rows_;
  // Per compute thread: a verified position's history, the item's tokens then the drafts before
  // it, [max_context].
  std::vector<std::vector<int32_t>> draft_histories_;
  bool healthy_ = true;
  // KV-Compress: each compressed sequence's table ([layers][kv heads][max_context] positions and
  // metric sums, 8 bytes an entry), kept across steps until the plan releases it.
  std::unordered_map<SeqId, std::unique_ptr<KvHeadTable>> kv_tables_;
  KvCompressor compressor_;
};

}  // namespace drift
