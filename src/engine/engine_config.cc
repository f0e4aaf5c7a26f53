#include "engine/engine_config.h"

#include <algorithm>
#include <limits>
#include <string_view>

namespace drift {

namespace {

Status validate_model_facts(const ModelFacts& model) {
  if (model.n_ctx_train < 1)
    return make_error("model.n_ctx_train must be >= 1, got {}", model.n_ctx_train);
  if (model.vocab_size < 1)
    return make_error("model.vocab_size must be >= 1, got {}", model.vocab_size);
  for (TokenId id : model.eog_token_ids)
    if (id < 0 || id >= model.vocab_size)
      return make_error("model.eog_token_ids: {} is outside the vocabulary of {}", id,
                        model.vocab_size);
  if (!model.layer_windows.empty() && int64_t(model.layer_windows.size()) != model.num_layers)
    return make_error("model.layer_windows has {} layers, the model {}", model.layer_windows.size(),
                      model.num_layers);
  return Status::Ok();
}

struct ResolvedContext {
  int32_t length;
  ContextBound bound;
};

// The context length: given, or the smallest of the trained context, the tokens the KV cache
// holds and the limit (ties go to the model: it is the bound an operator can least change).
Expected<ResolvedContext> resolve_max_model_len(const EngineConfig& config, const ModelFacts& model,
                                                int64_t kv_tokens) {
  if (config.max_model_len_limit < 1)
    return make_error("max_model_len_limit must be >= 1, got {}", config.max_model_len_limit);
  if (config.max_model_len) {
    if (*config.max_model_len < 2)
      return make_error("max_model_len must be >= 2 (one prompt and one generated token), got {}",
                        *config.max_model_len);
    if (*config.max_model_len > model.n_ctx_train)
      return make_error("max_model_len {} exceeds the model's trained context of {} tokens",
                        *config.max_model_len, model.n_ctx_train);
    return ResolvedContext{*config.max_model_len, ContextBound::kConfigured};
  }
  ResolvedContext resolved{int32_t(std::min<int64_t>(model.n_ctx_train, INT32_MAX)),
                           ContextBound::kModel};
  if (kv_tokens < resolved.length) resolved = {int32_t(kv_tokens), ContextBound::kKvCache};
  if (config.max_model_len_limit < resolved.length)
    resolved = {config.max_model_len_limit, ContextBound::kLimit};
  if (resolved.length < 2)
    return make_error(
        "max_model_len resolves to {} (the smallest of the trained context {}, the KV cache's {} "
        "tokens and max_model_len_limit {}); it must be >= 2",
        resolved.length, model.n_ctx_train, kv_tokens, config.max_model_len_limit);
  return resolved;
}

}  // namespace

Expected<EngineSetup> resolve_engine_setup(const EngineConfig& config, const ModelFacts& model,
                                           uint64_t ram_bytes) {
  DRIFT_RETURN_IF_ERROR(validate_model_facts(model));
  EngineSetup setup;
  DRIFT_RETURN_IF_ERROR(config.latency.validate());
  setup.latency = config.latency;

  if (config.kv.page_size < 1 || config.kv.page_size > 4096)
    return make_error("kv.page_size must be in [1, 4096], got {}", config.kv.page_size);
  std::vector<int32_t> windows = model.layer_windows;
  if (windows.empty()) windows.assign(size_t(std::max(0, model.num_layers)), 0);
  if (windows.empty())
    return make_error("model: kv layout: num_layers must be >= 1, got {}", model.num_layers);
  DRIFT_ASSIGN_OR_RETURN(setup.kv_grouping, group_kv_layers(windows, config.kv.hybrid));
  setup.kv_layout = kv_layout_with_groups(KVLayout{.num_layers = model.num_layers,
                                                   .num_kv_heads = model.num_kv_heads,
                                                   .head_dim = model.head_dim,
                                                   .page_size = config.kv.page_size,
                                                   .dtype = config.kv.dtype},
                                          setup.kv_grouping);
  if (config.kv.dtype == KVDtype::kInt4 &&
      (model.head_dim % kKVGroup != 0 || config.kv.page_size % 2 != 0))
    return make_error(
        "kv.dtype: int4 needs a head dimension that is a multiple of {} and an even page size "
        "(this model: head dim {}, page size {}); use int8",
        kKVGroup, model.head_dim, config.kv.page_size);
  if (Status s = setup.kv_layout.validate(); !s.ok()) return make_error("model: {}", s.message());
  Expected<int32_t> pages = kv_pages_for_budget(setup.kv_layout, config.kv.budget, ram_bytes);
  if (!pages.ok()) {
    std::string_view why = pages.error().message;
    if (why.starts_with("kv budget: ")) why.remove_prefix(11);
    return make_error("kv.budget: {}", why);
  }
  setup.num_kv_pages = *pages;
  setup.enable_prefix_caching = config.kv.enable_prefix_caching;
  if (config.kv.disk_dir) {
    if (config.kv.disk_dir->empty()) return make_error("kv.disk_dir: give a directory");
    if (!config.kv.enable_prefix_caching)
      return make_error(
          "kv.disk_dir: the disk tier keeps the prefix cache's pages, and prefix caching is off");
    if (!(config.kv.disk_gib > 0 && config.kv.disk_gib <= 1e6))
      return make_error("kv.disk_gib must be in (0, 1e6], got {}", config.kv.disk_gib);
    setup.kv_disk_dir = config.kv.disk_dir;
    setup.kv_disk_budget_bytes = uint64_t(config.kv.disk_gib * double(uint64_t{1} << 30));
  }
  if (model.embedding_size < 0)
    return make_error("model.embedding_size must be >= 0, got {}", model.embedding_size);
  setup.embedding_size = model.embedding_size;

  // The context is sized after the KV cache, which may hold fewer tokens than the model's.
  setup.kv_tokens =
      setup.kv_layout.tokens_held(*pages, int64_t(config.scheduler.max_step_tokens()));
  DRIFT_ASSIGN_OR_RETURN(ResolvedContext context,
                         resolve_max_model_len(config, model, setup.kv_tokens));
  setup.max_model_len = context.length;
  setup.max_model_len_bound = context.bound;
  setup.scheduler = config.scheduler;
  setup.scheduler.max_model_len = setup.max_model_len;
  if (Status s = setup.scheduler.validate(); !s.ok())
    return make_error("scheduler.{}", s.message());

  if (config.default_max_tokens && *config.default_max_tokens < 1)
    return make_error("default_max_tokens must be >= 1, got {}", *config.default_max_tokens);
  setup.default_max_tokens = config.default_max_tokens;
  DRIFT_ASSIGN_OR_RETURN(setup.sampling,
                         resolve_sampling_defaults(config.sampling, model.recommended_sampling,
                                                   config.sampling_defaults));
  if (config.max_queued_requests < 1)
    return make_error("max_queued_requests must be >= 1, got {}", config.max_queued_requests);
  setup.max_queued_requests = config.max_queued_requests;
  if (config.threads < 1 || config.threads > 1024)
    return make_error("threads must be in [1, 1024], got {}", config.threads);
  setup.threads = config.threads;
  DRIFT_RETURN_IF_ERROR(config.sessions.validate());
  setup.sessions = config.sessions;
  return setup;
}

std::string_view context_bound_name(ContextBound bound) {
  switch (bound) {
    case ContextBound::kConfigured:
      return "set by --ctx-size";
    case ContextBound::kModel:
      return "the model's trained context";
    case ContextBound::kKvCache:
      return "what the KV cache holds";
    case ContextBound::kLimit:
      return "max_model_len_limit";
  }
  return "?";
}

}  // namespace drift
