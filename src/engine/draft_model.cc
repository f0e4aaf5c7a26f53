#include "engine/draft_model.h"

#include <algorithm>

namespace drift {

Expected<std::unique_ptr<DraftModel>> DraftModel::create(const DraftModelSource& source,
                                                         const EngineConfig& config,
                                                         const EngineSetup& setup,
                                                         int32_t target_vocab_size) {
  if (source.facts.vocab_size != target_vocab_size)
    return make_error("spec_draft.model_path: the draft model has {} tokens, the model {}",
                      source.facts.vocab_size, target_vocab_size);
  if (config.spec_draft.kv_mib < 0)
    return make_error("spec_draft.kv_mib must be >= 0, got {}", config.spec_draft.kv_mib);
  KVLayout layout{.num_layers = source.facts.num_layers,
                  .num_kv_heads = source.facts.num_kv_heads,
                  .head_dim = source.facts.head_dim,
                  .page_size = setup.kv_layout.page_size,
                  .dtype = setup.kv_layout.dtype};
  if (Status s = layout.validate(); !s.ok())
    return make_error("spec_draft.model_path: {}", s.message());
  const SchedulerConfig& sched = setup.scheduler;
  // Rule: by default enough for one sequence of max_model_len and a partial page for each other
  // one; a sequence the pool cannot hold gets n-gram drafts instead (never an error).
  const int64_t pages =
      config.spec_draft.kv_mib > 0
          ? int64_t((uint64_t(config.spec_draft.kv_mib) << 20) / layout.bytes_per_page())
          : layout.pages_for_tokens(setup.max_model_len) + sched.max_num_seqs;
  if (pages < sched.max_num_seqs || pages > int64_t(INT32_MAX))
    return make_error(
        "spec_draft.kv_mib: {} MiB hold {} pages of the draft model, it needs at least {} (one "
        "per sequence)",
        config.spec_draft.kv_mib, pages, sched.max_num_seqs);
  DraftExecutorSetup exec;
  exec.kv_layout = layout;
  exec.num_kv_pages = int32_t(pages);
  exec.threads = setup.threads;
  exec.drafter = ModelDrafterConfig{.max_sequences = sched.max_num_seqs,
                                    .max_context = setup.max_model_len,
                                    .max_draft_tokens = sched.spec.max_draft_tokens,
                                    .catch_up_tokens = 256};
  DRIFT_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, source.make_executor(exec));
  if (!executor) return make_error("spec_draft: the draft executor factory returned none");
  DRIFT_ASSIGN_OR_RETURN(KVCacheManager kv, KVCacheManager::create(layout, int32_t(pages)));
  return std::unique_ptr<DraftModel>(new DraftModel(source.resources, std::move(executor),
                                                    std::move(kv), exec.drafter,
                                                    uint64_t(pages) * layout.bytes_per_page()));
}

DraftModel::DraftModel(std::shared_ptr<const void> resources, std::unique_ptr<Executor> executor,
                       KVCacheManager kv, const ModelDrafterConfig& config, uint64_t kv_bytes)
    : resources_(std::move(resources)),
      executor_(std::move(executor)),
      kv_(std::move(kv)),
      drafter_(std::make_unique<ModelDrafter>(*executor_, kv_, config)),
      kv_bytes_(kv_bytes) {}

void DraftModel::propose(std::span<DraftAsk> asks) {
  const auto start = std::chrono::steady_clock::now();
  drafter_->propose(asks);
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++steps_;
}

}  // namespace drift
