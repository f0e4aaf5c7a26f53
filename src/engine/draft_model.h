// Speculative decoding's draft model inside the engine: its executor (built by the composition
// root for a second GGUF), its own KV cache — its geometry is not the target's, and its pages
// must never take the target's — and the scheduler's ModelDrafter over both, timed for /metrics
// (the scheduler reads no clock). docs/design-notes.md "Speculative decoding", part 4.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "engine/engine_config.h"
#include "kv/kv_cache_manager.h"
#include "scheduler/executor.h"
#include "scheduler/model_drafter.h"
#include "util/error.h"
#include "util/function_ref.h"

namespace drift {

// What the draft model's executor is built for.
struct DraftExecutorSetup {
  KVLayout kv_layout;  // one group: the draft's pages hold every layer
  int32_t num_kv_pages = 0;
  ModelDrafterConfig drafter;  // its passes: items, tokens, context
  int32_t threads = 1;
};

// The draft model as the composition root hands it to the engine.
struct DraftModelSource {
  ModelFacts facts;  // its KV geometry and vocabulary size (its tokens were checked equal)
  FunctionRef<Expected<std::unique_ptr<Executor>>(const DraftExecutorSetup&)> make_executor;
  std::shared_ptr<const void> resources;  // its weights, kept alive while its executor runs
};

class DraftModel final : public DraftProposer {
 public:
  // Sizes its KV cache (config.spec_draft.kv_mib, or max_model_len tokens and a page per
  // sequence) and builds its executor. Errors name the field: a vocabulary size other than the
  // target's, a KV budget too small for one page per sequence.
  static Expected<std::unique_ptr<DraftModel>> create(const DraftModelSource& source,
                                                      const EngineConfig& config,
                                                      const EngineSetup& setup,
                                                      int32_t target_vocab_size);

  // DraftProposer, timed.
  void propose(std::span<DraftAsk> asks) override;
  void start(SeqId seq) override { drafter_->start(seq); }
  void release(SeqId seq) override { drafter_->release(seq); }

  const ModelDrafterStats& stats() const { return drafter_->stats(); }
  double seconds() const { return seconds_; }  // spent proposing since the start
  uint64_t steps() const { return steps_; }    // steps that asked it
  uint64_t kv_bytes() const { return kv_bytes_; }
  const KVCacheManager& kv() const { return kv_; }

 private:
  DraftModel(std::shared_ptr<const void> resources, std::unique_ptr<Executor> executor,
             KVCacheManager kv, const ModelDrafterConfig& config, uint64_t kv_bytes);

  std::shared_ptr<const void> resources_;  // outlives the executor that reads it
  std::unique_ptr<Executor> executor_;
  KVCacheManager kv_;
  std::unique_ptr<ModelDrafter> drafter_;
  uint64_t kv_bytes_ = 0;
  double seconds_ = 0;
  uint64_t steps_ = 0;
};

}  // namespace drift
