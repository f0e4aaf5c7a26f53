// The composition root: the one place that knows the engine runs a GGUF model on the CPU
// executor.
#include "runtime/load_engine.h"

#include <algorithm>

#include "engine/sampling_defaults.h"
#include "engine/tokenizer_codec.h"
#include "executor/cpu_executor.h"
#include "kv_events/zmq_kv_event_publisher.h"
#include "model/model.h"
#include "model/recommended_sampling.h"
#include "runtime/draft_model_loader.h"
#include "runtime/failing_executor.h"
#include "runtime/model_identity.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"
#include "util/cpu_features.h"
#include "util/log.h"

namespace drift {

namespace {

ModelFacts model_facts(const ModelConfig& config, const Tokenizer& tokenizer,
                       const GgufFile& file) {
  ModelFacts facts;
  std::span<const int32_t> eog = tokenizer.eog_tokens();
  facts.eog_token_ids.assign(eog.begin(), eog.end());
  facts.n_ctx_train = config.n_ctx_train;
  facts.vocab_size = int32_t(config.n_vocab);
  facts.embedding_size = int32_t(config.n_embd);
  facts.num_layers = int32_t(config.n_layers);
  facts.num_kv_heads = int32_t(config.n_kv_heads);
  // KVLayout has one head width; the larger of K's and V's keeps the budget an upper bound.
  facts.head_dim = int32_t(std::max(config.head_dim, config.head_dim_v));
  for (const LayerConfig& layer : config.layers)
    facts.layer_windows.push_back(layer.sliding_window ? int32_t(config.sliding_window) : 0);
  RecommendedSampling recommended = read_recommended_sampling(file);
  for (const std::string& why : recommended.ignored)
    spdlog::warn("{}: sampling recommendation ignored: {}", file.path(), why);
  facts.recommended_sampling = std::move(recommended.settings);
  return facts;
}

}  // namespace

Expected<LoadedModel> load_model(const std::string& model_path, const ModelLoadOptions& options) {
  DRIFT_ASSIGN_OR_RETURN(Isa isa, select_isa(detect_cpu_features()));
  DRIFT_ASSIGN_OR_RETURN(std::unique_ptr<Model> loaded_model, Model::load(model_path, isa));
  // Shared with the engine, which keeps it alive for the executor that reads its weights.
  std::shared_ptr<const Model> model = std::move(loaded_model);
  DRIFT_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::from_gguf(model->file()));
  DRIFT_ASSIGN_OR_RETURN(ChatPromptBuilder chat, ChatPromptBuilder::create(model->file(), tokenizer,
                                                                           options.chat_template));
  if (chat.source() == ChatTemplateSource::kChatmlFallback)
    spdlog::warn(
        "{} has no chat template; using ChatML for conversations (--chat-template FILE "
        "gives another)",
        model_path);
  ModelFacts facts = model_facts(model->config(), tokenizer, model->file());
  return LoadedModel{model, make_tokenizer_codec(std::move(tokenizer), std::move(chat)),
                     std::move(facts)};
}

Expected<std::unique_ptr<Engine>> start_engine(const LoadedModel& model, const EngineConfig& config,
                                               const ExecutorOptions& executor_options,
                                               const KVEventsOptions& kv_events) {
  const Model& loaded = *model.model;
  std::shared_ptr<KVEventSink> publisher;
  if (kv_events.endpoint) {
    // The events describe the prefix cache; without it there would be none to send.
    if (!config.kv.enable_prefix_caching)
      return make_error(
          "kv_events_endpoint: KV events need the prefix cache (no_prefix_cache "
          "is set)");
    DRIFT_ASSIGN_OR_RETURN(publisher,
                           ZmqKVEventPublisher::create({.endpoint = *kv_events.endpoint,
                                                        .topic = kv_events.topic,
                                                        .page_size = config.kv.page_size}));
  }
  auto make_executor = [&](const EngineSetup& setup) -> Expected<std::unique_ptr<Executor>> {
    CpuExecutorConfig c;
    c.threads = setup.threads;
    c.num_pages = setup.num_kv_pages;
    c.page_size = setup.kv_layout.page_size;
    c.kv_format = kv_format_of(setup.kv_layout.dtype);
    c.max_batch_tokens = setup.scheduler.max_num_batched_tokens;
    c.max_batch_sequences = setup.scheduler.max_num_seqs;
    c.max_context = setup.max_model_len;
    c.max_draft_tokens = setup.scheduler.spec.max_plan_draft_tokens();
    c.kv_compress = setup.scheduler.kv_compress;
    if (setup.kv_grouping.num_groups() > 1)
      c.kv_placement =
          KvLayerPlacement{setup.kv_grouping.layers_per_group, setup.kv_grouping.layer_group,
                           setup.kv_grouping.layer_slot};
    DRIFT_ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutor> executor, CpuExecutor::create(loaded, c));
    if (executor_options.debug_fail_at_step)
      return std::unique_ptr<Executor>(std::make_unique<FailingExecutor>(
          std::move(executor), *executor_options.debug_fail_at_step));
    return std::unique_ptr<Executor>(std::move(executor));
  };
  ModelFacts facts = model.facts;
  if (config.kv.disk_dir) facts.kv_identity = model_kv_identity(loaded);
  // The draft model of speculative decoding, when one is named and speculation is on.
  std::optional<LoadedModel> draft;
  if (config.spec_draft.model_path && config.scheduler.spec.enabled()) {
    DRIFT_ASSIGN_OR_RETURN(draft, load_draft_model(*config.spec_draft.model_path, model));
  } else if (config.scheduler.spec.enabled() && config.scheduler.spec.mode == SpecMode::kDraft) {
    return make_error("--spec draft needs a draft model: give it with --spec-draft-model PATH");
  }
  auto make_draft = [&](const DraftExecutorSetup& setup) {
    return make_draft_executor(*draft, setup);
  };
  std::optional<DraftModelSource> draft_source;
  if (draft) draft_source.emplace(DraftModelSource{draft->facts, make_draft, draft->model});
  DRIFT_ASSIGN_OR_RETURN(
      std::unique_ptr<Engine> engine,
      Engine::create(config, facts, model.codec, make_executor, model.model, std::move(publisher),
                     draft_source ? &*draft_source : nullptr));
  if (const std::optional<KVDiskMetrics> disk = engine->metrics().kv_disk) {
    spdlog::info(
        "kv cache dir {}: {} pages of this model found ({:.1f} MiB of {:.1f} GiB), {} files "
        "dropped (a crash's leftovers, damaged)",
        *config.kv.disk_dir, disk->store.pages, double(disk->store.bytes) / (1 << 20),
        double(disk->store.budget_bytes) / (1 << 30), disk->store.files_dropped_at_start);
  }
  return engine;
}

Expected<std::unique_ptr<Engine>> load_engine(const std::string& model_path,
                                              const EngineConfig& config,
                                              const ModelLoadOptions& options,
                                              const ExecutorOptions& executor,
                                              const KVEventsOptions& kv_events) {
  DRIFT_ASSIGN_OR_RETURN(LoadedModel model, load_model(model_path, options));
  return start_engine(model, config, executor, kv_events);
}

kernels::KvFormat kv_format_of(KVDtype dtype) {
  switch (dtype) {
    case KVDtype::kF16:
      return kernels::KvFormat::kF16;
    case KVDtype::kBF16:
      return kernels::KvFormat::kBF16;
    case KVDtype::kF32:
      return kernels::KvFormat::kF32;
    case KVDtype::kInt8:
      return kernels::KvFormat::kInt8;
    case KVDtype::kInt4:
      return kernels::KvFormat::kInt4;
  }
  return kernels::KvFormat::kF16;
}

}  // namespace drift
