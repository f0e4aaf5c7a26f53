// A request as the scheduler receives it (inside an AdmittedRequest, admitted_request.h), and the
// state of its sequence from arrival to finish.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kv/kv_types.h"
#include "kv/prefix_cache.h"
#include "scheduler/adaptive_draft_length.h"
#include "scheduler/pooling_mode.h"
#include "util/sampling_params.h"
#include "util/token_constraint.h"

namespace drift {

using TokenId = int32_t;

// Waiting --admitted--> Prefill --executor reports the last prompt chunk--> Decode
//    ^                     |                                                 |
//    +---- preempted ------+-------------------------------------------------+
// and any phase --stop token, max tokens, cancel, error--> Finished. An embedding request goes
// from its last prompt chunk straight to Finished, with its pooled vector.
enum class SequencePhase : uint8_t { kWaiting, kPrefill, kDecode, kFinished };

enum class FinishReason : uint8_t {
  kStop,       // an end-of-sequence or stop token was sampled, or an embedding was pooled
  kLength,     // max_new_tokens were generated
  kCancelled,  // cancel()
  kError,      // the executor failed on this sequence
  kRejected,   // the engine refused the request (its events only: the scheduler never saw it)
};

std::string_view sequence_phase_name(SequencePhase phase);
std::string_view finish_reason_name(FinishReason reason);

struct SequenceRequest {
  SeqId id = 0;
  std::vector<TokenId> prompt;  // at least one token
  int32_t max_new_tokens = 0;   // at least 1; 0 for an embedding request
  // Larger is admitted first under the priority policy; under every policy, when a page must be
  // freed the lowest priority (then the latest arrival) is preempted first.
  int32_t priority = 0;
  SamplingParams sampling;
  // The grammar the output must follow (constrained decoding); null for free output.
  std::shared_ptr<TokenConstraint> constraint;
  // Requests share cached KV pages only within one namespace (e.g. a model adapter).
  uint64_t cache_namespace = 0;
  // Not kNone: an embedding request. Its prompt is prefilled and nothing is sampled; the
  // executor pools the prompt's final hidden states into `embedding` (one float per hidden unit,
  // sized by the caller, so that no step allocates it), which the last chunk's outcome carries.
  PoolingMode pooling = PoolingMode::kNone;
  std::vector<float> embedding;
  // KV-Compress: each KV head keeps at most this fraction (0, 1] of the positions once the
  // sequence is longer than kv_compress.min_tokens (1: never compressed). The engine's judge
  // resolves it: the request's own, else the configured kv_compress.keep; 1 for an embedding.
  double kv_keep = 1.0;
};

// Where a speculative draft came from: the sequence's own prompt and output, the n-gram pool
// shared across requests, the tokens its grammar forces, or the draft model.
enum class DraftSource : uint8_t { kOwnHistory, kPool, kGrammar, kDraftModel };

struct SequenceState {
  SeqId id = 0;
  // The prompt followed by the generated tokens. Capacity for prompt + max_new_tokens is reserved
  // when the request is added, so steps never reallocate it and spans of it stay valid.
  std::vector<TokenId> tokens;
  int32_t prompt_len = 0;
  // Tokens (from the start of `tokens`) whose K/V the executor reported written: the prefilled
  // length. Preemption resets it to 0; the tokens stay, to be recomputed.
  int32_t num_computed_tokens = 0;
  int32_t max_new_tokens = 0;
  int32_t priority = 0;
  SamplingParams sampling;
  // Advanced with each committed token; the sequence stops when it is complete.
  std::shared_ptr<TokenConstraint> constraint;
  uint64_t cache_namespace = 0;
  PoolingMode pooling = PoolingMode::kNone;
  // An embedding request's pooled vector: the executor's accumulator until the last chunk, then
  // the result (moved into that chunk's outcome).
  std::vector<float> embedding;
  // The sequence's leading full pages that the prefix cache knows (hit at admission or registered
  // since); reset at each admission.
  PrefixCursor prefix;
  // The disk tier read pages after its cached prefix since it last waited (once per admission:
  // pages read back and evicted again before it is admitted are computed).
  bool tier_fetched = false;
  // The RAM hit (pages) with which the tier was last asked and had nothing to read; it is asked
  // again only when the hit changes — a preempted sequence's pages still cached when it first
  // asks may be evicted to disk while it waits. nullopt: not asked since it last waited.
  std::optional<int32_t> tier_asked_at_pages;
  // Held, waiting for the pool to take its whole run on disk, until the scheduler's executed
  // seconds reach this (what computing that run would take); then it loads what fits and
  // computes the rest. nullopt: not held since it last waited.
  std::optional<double> tier_hold_until;
  // Preempted by swap with this many computed tokens (0: not swapped since its last admission):
  // the tier holds its pages, its partial last page included, for its re-admission.
  int32_t swapped_tokens = 0;
  uint64_t arrival_step = 0;   // the scheduler's step count when added
  uint64_t arrival_order = 0;  // unique, increasing with each add()
  double waiting_rank = 0;     // virtual arrival step (policy with aging); lower is admitted first
  SequencePhase phase = SequencePhase::kWaiting;
  int32_t num_preemptions = 0;
  // Times a later request was admitted while this one, blocked, waited (max_overtakes).
  int32_t times_overtaken = 0;
  std::optional<uint64_t> first_admitted_step;
  // Tokens the prefix cache held for it at its first admission (usage's cached prompt tokens).
  int32_t first_prefix_hit_tokens = 0;
  std::optional<uint64_t> last_scheduled_step;
  // Cancelled while in the outstanding plan: retired when the plan is reported.
  bool cancel_pending = false;
  // KV-Compress: the kept fraction (1: never compressed); positions whose K/V the executor has
  // evicted, so that the sequence holds num_computed_tokens - kv_evicted slots; and the slots
  // kept as they are (its prefix-cache hit, pages others may read).
  double kv_keep = 1.0;
  int32_t kv_evicted = 0;
  int32_t kv_keep_from = 0;
  // Speculative decoding: whether the sequence's decodes carry drafts (the engine's spec mode is
  // on and nothing it asks for rules them out), and how long its next draft may be.
  bool speculates = false;
  AdaptiveDraftLength draft_length;
  // Where the draft of the outstanding step came from (for the counts by source).
  DraftSource draft_source = DraftSource::kOwnHistory;
  // The draft model's proposal for this step (its first model_draft_len tokens), made before the
  // step's decodes are placed; [max_draft_tokens], sized when the request is added.
  std::vector<TokenId> model_draft;
  int32_t model_draft_len = 0;

  int32_t total_len() const { return static_cast<int32_t>(tokens.size()); }
  bool kv_compressed() const { return kv_keep < 1.0; }
  // KV slots the sequence holds in every head.
  int32_t kv_slots() const { return num_computed_tokens - kv_evicted; }
  int32_t generated_len() const { return total_len() - prompt_len; }
  bool embeds() const { return pooling != PoolingMode::kNone; }
  // Tokens still to be run through the model before the next sample: the rest of the prompt
  // (and, after a preemption, of the generated text) during prefill, 1 during decode.
  int32_t num_pending_tokens() const { return total_len() - num_computed_tokens; }
  std::span<const TokenId> prompt() const { return {tokens.data(), size_t(prompt_len)}; }
  std::span<const TokenId> generated() const {
    return {tokens.data() + prompt_len, size_t(generated_len())};
  }
};

}  // namespace drift
