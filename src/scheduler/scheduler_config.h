// The knobs of the engine scheduler: step budgets, chunked prefill, the waiting-queue policy with
// its aging, and the KV admission mode. Complete when constructed; validate() names the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "kv/kv_eviction.h"
#include "scheduler/preemption_cost.h"
#include "util/error.h"

namespace drift {

// The order in which waiting requests are admitted. Every policy ages requests (see
// SchedulerConfig), so no wait is unbounded.
enum class SchedulerPolicy : uint8_t {
  kFcfs,        // arrival order
  kSmallFirst,  // shorter prompts first
  kPriority,    // larger SequenceRequest::priority first
};

// How admission uses the KV cache.
enum class AdmissionMode : uint8_t {
  // Admit only if prompt + max_new_tokens fit in the pages not yet promised: the pages are
  // reserved, so an admitted sequence never runs out of KV.
  kGuaranteed,
  // Admit while pages are free; when a running sequence needs a page and none is left, preempt a
  // lower-ranked one by recompute (free its pages, keep its tokens, requeue it).
  kOptimistic,
};

std::string_view scheduler_policy_name(SchedulerPolicy policy);  // "fcfs", "small_first", ...
std::optional<SchedulerPolicy> parse_scheduler_policy(std::string_view name);
std::string_view admission_mode_name(AdmissionMode mode);  // "guaranteed", "optimistic"
std::optional<AdmissionMode> parse_admission_mode(std::string_view name);

// The longest draft SpecConfig::max_draft_tokens may allow.
inline constexpr int32_t kMaxSpecDraftTokens = 64;

// Speculative decoding: where a decoding sequence's drafts come from.
enum class SpecMode : uint8_t {
  kNone,   // one token per decode step
  kNgram,  // drafts from the sequence's own prompt and output (scheduler/ngram_drafter.h)
  kAuto,   // kNgram's drafts (and the draft model's, when there is one), in the steps where they
           // are measured to pay (spec_auto_gate.h)
  kDraft,  // the draft model's drafts, or n-grams where they match long (draft_proposer.h)
};
std::string_view spec_mode_name(SpecMode mode);  // "none", "ngram", "auto", "draft"

// Drafts ride in a decode item (1 + k tokens) and are verified by the executor in the same
// forward pass; only the spare part of a step's token budget goes to them (docs/design-notes.md
// "Speculative decoding").
struct SpecConfig {
  SpecMode mode = SpecMode::kNone;
  // The longest draft of one sequence in one step (its adaptive length's ceiling).
  int32_t max_draft_tokens = 8;
  // Draft tokens of a whole step, less one for each decoding sequence: drafts shrink as the
  // batch grows and vanish once this many sequences decode, where a CPU step stops being bound
  // by reading the weights and extra tokens are no longer nearly free.
  int32_t max_step_draft_tokens = 32;
  // The n-gram pool shared across requests (scheduler/ngram_pool.h): its slots (8 bytes each;
  // 0: no pool) and the tokens that key a slot. A sequence drafts from it when its own history
  // has no match of at least pool_context tokens.
  int64_t pool_entries = 0;
  int32_t pool_context = 4;
  // With a draft model: an own-history n-gram match of at least this many tokens drafts instead
  // of the model (a long verbatim repeat predicts better than a small model, and costs nothing).
  int32_t ngram_over_model_match = 4;

  bool enabled() const { return mode != SpecMode::kNone && max_draft_tokens > 0; }
  // Most draft tokens one plan can carry (0 when off): what the executor sizes its logits for.
  int32_t max_plan_draft_tokens() const { return enabled() ? max_step_draft_tokens : 0; }
  Status validate() const;
};

struct SchedulerConfig {
  // Tokens one step may process, decode and prefill together. At least max_num_seqs, so that
  // every running sequence's decode token fits in one step.
  int32_t max_num_batched_tokens = 2048;
  // Sequences admitted (prefilling or decoding) at once; hence also items per step.
  int32_t max_num_seqs = 64;
  // Longest sequence, prompt plus generated tokens. Requests beyond it are rejected.
  int32_t max_model_len = 4096;
  // Split prompts into chunks across steps. When off, a prompt is prefilled in one step, which
  // requires max_num_batched_tokens >= max_model_len.
  bool enable_chunked_prefill = true;
  // Sequences whose prefill may be left unfinished at the end of a step (partial prefills).
  // Prompts that are prefilled whole within one step do not count against it.
  int32_t max_num_partial_prefills = 1;
  // When set, no prefill chunk of one sequence exceeds this many tokens in a step, so a long
  // prompt cannot take the whole budget. Needs chunked prefill.
  std::optional<int32_t> long_prefill_token_threshold;
  // A waiting request blocked by KV pages or by the partial-prefill limit (a long prompt) may be
  // passed by later requests that fit — a 4-token prompt is not held for seconds behind a large
  // one — but at most this many times; after that it keeps its place until admitted, so no
  // request is overtaken forever. 0: strict order.
  int32_t max_overtakes = 32;
  // true: a step first gives every decoding sequence its token, then fills the rest of the budget
  // with prefill chunks (steady inter-token latency). false: prefill chunks first (lower time to
  // first token); decodes take what is left of the token budget, and a decode that does not fit
  // waits a step — a wait bounded by the prefill work of at most max_num_seqs admitted
  // sequences. New admissions still leave the KV pages that this step's decodes need.
  bool prefer_decode_over_prefill = true;
  SchedulerPolicy policy = SchedulerPolicy::kFcfs;
  AdmissionMode admission = AdmissionMode::kGuaranteed;
  // What a preempted sequence's pages become (optimistic admission with a disk tier): swapped
  // out to the tier or recomputed, by the cost model (scheduler/preemption_cost.h) or always one
  // way. Without a tier every preemption recomputes.
  PreemptionPolicy preemption = PreemptionPolicy::kAuto;
  // Aging. A waiting request is admitted in order of a virtual arrival step:
  //   fcfs         arrival
  //   small_first  arrival + prompt_tokens / small_first_tokens_per_step
  //   priority     arrival - priority * priority_steps_per_level
  // so a request is never overtaken by one that arrived more than
  // (its prompt_tokens / small_first_tokens_per_step) steps after it (small_first), or more than
  // (priority difference * priority_steps_per_level) steps after it (priority).
  double small_first_tokens_per_step = 64.0;
  double priority_steps_per_level = 64.0;
  // KV-Compress (kv/kv_eviction.h): the kv_keep of requests that do not give one (1: off), the
  // policy, and when and how much each head keeps.
  KvCompressConfig kv_compress;
  // Speculative decoding (off unless set).
  SpecConfig spec;

  Status validate() const;
  // The most tokens one step adds to a sequence: a chunk of at most long_prefill_token_threshold
  // with chunked prefill (when set), else the whole step's budget.
  int32_t max_step_tokens() const {
    return enable_chunked_prefill && long_prefill_token_threshold ? *long_prefill_token_threshold
                                                                  : max_num_batched_tokens;
  }
};

}  // namespace drift
