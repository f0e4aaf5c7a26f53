// The engine's configuration, as a user writes it (EngineConfig), the facts about the model it
// needs (ModelFacts), and what the engine derives from both once, at construction (EngineSetup):
// the context length, the KV page count and the scheduler's settings.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/latency_planner.h"
#include "engine/sampling_defaults.h"
#include "engine/session_store.h"
#include "kv/kv_capacity.h"
#include "kv/kv_digest.h"
#include "kv/kv_groups.h"
#include "kv/kv_layout.h"
#include "scheduler/scheduler_config.h"
#include "scheduler/sequence_state.h"
#include "util/error.h"

namespace drift {

struct KVConfig {
  int32_t page_size = 16;  // tokens per KV page
  // The memory the KV cache takes: explicit bytes or a fraction of physical RAM (exactly one).
  KVMemoryBudget budget = KVMemoryBudget::of_ram_fraction(0.1);
  // Element type of stored K/V: f16, bf16, f32, or int8/int4 codes with fp16 scales (kv_layout.h);
  // the budget above counts the chosen type's real bytes, so int8 holds ~1.9x the tokens of f16.
  KVDtype dtype = KVDtype::kBF16;
  // Keep the full pages of finished (and preempted, cancelled) requests, and let a new request
  // that starts with the same tokens share them instead of computing them again (prefix_cache.h).
  // Outputs are identical with it on or off; only the time to first token changes.
  bool enable_prefix_caching = true;
  // Split the layers into KV groups by attention kind (kv/kv_groups.h), so that sliding-window
  // layers free the pages that leave their window and capacity counts what a sequence holds at
  // once. Off: one group of every layer, each page holding all of them (as before groups).
  // Outputs are identical either way.
  bool hybrid = true;
  // A disk tier under the prefix cache (kv/prefix_disk_tier.h): full cached pages that the pool
  // reclaims are written to this directory, and a later prompt (also after a restart) whose
  // prefix continues onto them reads them back instead of computing them. Absent: RAM only.
  // Outputs are identical with it on or off.
  std::optional<std::string> disk_dir;
  double disk_gib = 16;  // the most the tier's pages of this model take in disk_dir
};

// Speculative decoding's draft model (SpecMode::kDraft, and kAuto when there is one): a second
// GGUF with the target's vocabulary, read by the composition root (runtime/), whose KV cache is
// its own (engine/draft_model.h).
struct SpecDraftConfig {
  std::optional<std::string> model_path;  // none: no draft model
  // The draft model's KV memory in MiB; 0: the pages of max_model_len tokens plus one per
  // sequence (its own geometry, dtype as kv.dtype).
  int64_t kv_mib = 0;
};

struct EngineConfig {
  // Step budgets, chunked prefill, waiting-queue policy and admission mode. Its max_model_len is
  // not read: the engine sets it to the resolved max_model_len below.
  SchedulerConfig scheduler;
  // Latency targets: the inter-token target that cuts each step's prefill to fit, the
  // first-token target, and predictive admission (latency_planner.h).
  LatencyConfig latency;
  KVConfig kv;
  // Longest sequence, prompt plus generated tokens. Absent: the model's trained context, capped
  // by the tokens the KV cache holds and by max_model_len_limit (EngineSetup::max_model_len_bound
  // says which won). Set: at most the trained context.
  std::optional<int32_t> max_model_len;
  int32_t max_model_len_limit = std::numeric_limits<int32_t>::max();
  // max_tokens of a request that gives none, capped by what is left of max_model_len (and of the
  // KV cache) after its prompt. Absent: all of that, so generation runs until a stop or the
  // context is full (as vLLM does).
  std::optional<int32_t> default_max_tokens;
  // Requests submitted but not yet admitted (in the gateway or the scheduler's waiting queue)
  // beyond which submit rejects at once with an "overloaded" error.
  int32_t max_queued_requests = 256;
  // Compute threads of the executor, the engine worker included (runtime/load_engine.h).
  int32_t threads = 1;
  // Conversation sessions (Request::session_id): caps and idle time-to-live.
  SessionConfig sessions;
  // Sampling defaults for the fields a request leaves unset (sampling_defaults.h): the
  // operator's settings (e.g. `drift serve --temp`), over the model's recommendation, over
  // llama.cpp's defaults, or OpenAI's with sampling_defaults = kOpenAI.
  SamplingSettings sampling;
  SamplingDefaultsBase sampling_defaults = SamplingDefaultsBase::kModel;
  SpecDraftConfig spec_draft;
};

// What the engine must know about the model, whichever executor runs it.
struct ModelFacts {
  // End-of-generation tokens (EOS, EOT, ...): a sampled one finishes the sequence with "stop"
  // unless the request sets ignore_eos.
  std::vector<TokenId> eog_token_ids;
  int64_t n_ctx_train = 0;     // context length the model was trained with
  int32_t vocab_size = 0;      // prompt token ids must be below it
  int32_t embedding_size = 0;  // floats of an embedding (the hidden size); 0: none can be made
  // KV geometry (page size and dtype come from KVConfig).
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;  // the larger of the K and V head widths, so the budget is never exceeded
  // [num_layers] each layer's sliding window, 0 for full attention; empty: every layer full.
  std::vector<int32_t> layer_windows;
  // What the model's K/V depends on besides its tokens and the KV layout: the weights and the RoPE
  // settings (runtime/ digests them). A disk tier keeps pages apart by it (with the layout), so
  // another model never reads them; zero for a fake model.
  KVDigest kv_identity;
  // The sampling the model's file recommends (general.sampling.*); empty when it has none.
  SamplingSettings recommended_sampling;
};

// What decided max_model_len.
enum class ContextBound {
  kConfigured,  // EngineConfig::max_model_len (`-c`)
  kModel,       // the model's trained context
  kKvCache,     // the tokens the KV cache holds
  kLimit,       // EngineConfig::max_model_len_limit
};
std::string_view context_bound_name(ContextBound bound);

// Everything the engine derives at construction; the executor is built from it.
struct EngineSetup {
  SchedulerConfig scheduler;  // with max_model_len resolved
  LatencyConfig latency;
  KVLayout kv_layout;
  KVGrouping kv_grouping;  // each layer's group and page slot (kv_layout's groups)
  int32_t num_kv_pages = 0;
  // The longest sequence the KV cache holds alone (KVLayout::tokens_held at the scheduler's
  // step size): with sliding groups, more than num_kv_pages / groups * page_size.
  int64_t kv_tokens = 0;
  bool enable_prefix_caching = false;
  std::optional<std::string> kv_disk_dir;  // the disk tier's directory (none: no tier)
  uint64_t kv_disk_budget_bytes = 0;
  int32_t max_model_len = 0;
  ContextBound max_model_len_bound = ContextBound::kConfigured;
  std::optional<int32_t> default_max_tokens;
  int32_t max_queued_requests = 0;
  int32_t threads = 0;
  int32_t embedding_size = 0;  // floats of an embedding request's vector; 0: the model makes none
  SessionConfig sessions;
  SamplingDefaults sampling;  // what unset sampling fields of a request take, and from where
};

// Validates every field (the error names it, e.g. "kv.dtype: ...", "scheduler.max_num_seqs ...")
// and derives the setup; `ram_bytes` is the physical RAM a kv.budget fraction applies to.
Expected<EngineSetup> resolve_engine_setup(const EngineConfig& config, const ModelFacts& model,
                                           uint64_t ram_bytes);

}  // namespace drift
