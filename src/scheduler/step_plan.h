// What the scheduler and the executor exchange once per step — and nothing else: the StepPlan
// (explicit step descriptor: every scheduled token, where its K/V goes, which pages each sequence
// attends over, who samples) and the ExecutionResult (one outcome per item). Both are reused
// across steps: clear() keeps capacity, so a step allocates nothing after warm-up.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kv/kv_types.h"
#include "scheduler/sequence_state.h"
#include "util/error.h"
#include "util/sampling_params.h"

namespace drift {

enum class StepItemKind : uint8_t {
  kPrefill,  // a chunk of the prompt (or, after preemption, of prompt + generated text)
  kDecode,   // the newest token of a decoding sequence, then any drafts to verify
};

// One sequence's share of the step: tokens [start_position, start_position + num_tokens) of the
// sequence. The item attends over positions [0, context_len()) through its pages: one list per
// KV group (kv/kv_layout.h), num_pages each, where a sliding group holds kNoPage below its window.
struct StepItem {
  SeqId seq_id = 0;
  StepItemKind kind = StepItemKind::kPrefill;
  int32_t start_position = 0;
  int32_t num_tokens = 0;
  int32_t token_offset = 0;  // of its first token in token_ids
  int32_t page_offset = 0;   // of its first page in block_table
  int32_t num_pages = 0;     // pages of one group covering positions [0, context_len())
  // Sample a token from the logits of the last scheduled token: true for decode and for the last
  // chunk of a prefill, false for the earlier chunks (and for every chunk of an embedding).
  bool sample = false;
  // Speculative decoding (a decode item only): its last num_drafts tokens are drafted guesses of
  // what follows its first. The executor verifies them position by position, sampling each
  // position as a decode of the tokens before it would (same penalties, bias, filters and random
  // draw), and reports how many of them it accepted (ItemResult::accepted_drafts).
  int32_t num_drafts = 0;
  // An embedding request's chunk (pooling not kNone): the executor folds the final hidden states
  // of its tokens into `embedding`, the sequence's own storage (valid until the plan is
  // reported), starting afresh at position 0 (a preempted sequence is prefilled again); the chunk
  // that ends the prompt leaves there the pooled, L2-normalised vector.
  PoolingMode pooling = PoolingMode::kNone;
  std::span<float> embedding;
  // The sequence's settings; never null in a plan. Valid until the plan is reported.
  const SamplingParams* sampling = nullptr;
  // The sequence's grammar matcher, null when unconstrained: the executor takes its allowed-token
  // mask before sampling (and never advances it: the scheduler does, with the committed token).
  TokenConstraint* constraint = nullptr;
  // Prompt + generated tokens so far, for penalties; a view of the sequence's own storage, valid
  // until the plan is reported (on_step_executed / on_step_failed).
  std::span<const TokenId> history;
  // The first prompt_len tokens of `history` are the prompt; the rest were generated. Presence
  // and frequency penalties count only generated tokens, and the sampler's random stream is
  // indexed by the number generated so far.
  int32_t prompt_len = 0;
  // KV-Compress (the sequence's kv_keep < 1): its heads hold their own entries, in the executor's
  // per-head table, kv_slots of them each before this item, and its tokens take the next slots
  // of every head. Otherwise position p is at slot p (kv_slots == start_position).
  bool kv_compressed = false;
  int32_t kv_slots = 0;

  int32_t context_len() const { return start_position + num_tokens; }
  // The chunk that ends an embedding request's prompt.
  bool completes_embedding() const {
    return pooling != PoolingMode::kNone && context_len() == prompt_len;
  }
};

// KV-Compress order, run after the step's forward pass: item `item`'s sequence, now `positions`
// long, keeps `num_slots` entries in every head — those at positions below `keep_from` (pages it
// shares with the prefix cache) untouched, the others chosen by the eviction policy and moved
// down within the item's pages. The scheduler then returns the pages past num_slots to the pool.
struct KvCompression {
  int32_t item = 0;
  int32_t positions = 0;
  int32_t keep_from = 0;
  int32_t num_slots = 0;
  bool operator==(const KvCompression&) const = default;
};

struct StepPlan {
  uint64_t step = 0;      // the scheduler's step number
  int32_t page_size = 0;  // tokens per KV page
  int32_t kv_groups = 1;  // KV groups: page lists per item
  std::vector<StepItem> items;
  // Token k of an item is at position start_position + k of its sequence, and its K/V go to slot
  // slot(item, k) of the KV pages: the plan carries no per-token position or slot arrays, which
  // the executor would only recompute (ForwardSequence takes a start position and a page table).
  std::vector<TokenId> token_ids;  // [num_tokens] items' tokens, concatenated in item order
  // Items' page lists, concatenated in item order: [kv_groups][num_pages] each.
  std::vector<PageId> block_table;
  // Copy-on-write: before running the step, copy all K/V of each src page into its dst page.
  std::vector<PageCopy> page_copies;
  // After the forward pass, in item order: the compressions the executor performs.
  std::vector<KvCompression> kv_compressions;
  // Before the step: compressed sequences that ended (or were preempted) since the last plan,
  // whose per-head tables the executor drops.
  std::vector<SeqId> kv_tables_released;
  int32_t num_prefill_tokens = 0;
  int32_t num_decode_tokens = 0;  // one per decode item
  int32_t num_draft_tokens = 0;   // drafts of decode items, besides their decode tokens

  bool empty() const { return items.empty(); }
  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  // The item's page lists of every group, [kv_groups][num_pages].
  std::span<const PageId> pages(const StepItem& item) const {
    return {block_table.data() + item.page_offset, size_t(item.num_pages) * size_t(kv_groups)};
  }
  // Its page list of group `group`, [num_pages].
  std::span<const PageId> group_pages(const StepItem& item, int32_t group) const {
    return pages(item).subspan(size_t(group) * size_t(item.num_pages), size_t(item.num_pages));
  }
  std::span<const TokenId> tokens(const StepItem& item) const {
    return {token_ids.data() + item.token_offset, size_t(item.num_tokens)};
  }
  // page * page_size + slot % page_size for the item's k-th token in group `group`, at slot
  // kv_slots + k of its sequence (its position, unless compressed).
  int64_t slot(const StepItem& item, int32_t k, int32_t group = 0) const {
    const int32_t at = item.kv_slots + k;
    return int64_t(group_pages(item, group)[size_t(at / page_size)]) * page_size + at % page_size;
  }
  void clear() {
    items.clear();
    token_ids.clear();
    block_table.clear();
    page_copies.clear();
    kv_compressions.clear();
    kv_tables_released.clear();
    num_prefill_tokens = num_decode_tokens = num_draft_tokens = 0;
  }
};

// The executor's report on one item, in the plan's item order.
struct ItemResult {
  // The sampled token; required for an item with sample = true, ignored otherwise. For an item
  // with drafts, the token sampled after the accepted ones (where the first rejected draft was).
  std::optional<TokenId> token;
  // Of an item's drafts, how many (from the first) the executor accepted: they are generated
  // tokens, in order before `token`, and the K/V of the others are to be discarded.
  int32_t accepted_drafts = 0;
  // With logprobs asked for: those of each accepted draft, in order (`logprobs` is `token`'s),
  // in ExecutionResult::draft_logprobs.
  std::span<const TokenLogprobs> draft_logprobs;
  // The item failed; its sequence ends with this error while the others go on.
  std::optional<Error> error;
  // The sampled token's log-probabilities, when its sampling params ask for them.
  std::optional<TokenLogprobs> logprobs;
  // The item completes an embedding and its vector is in StepItem::embedding; required for such
  // an item.
  bool embedded = false;
};

struct ExecutionResult {
  std::vector<ItemResult> items;  // one per StepPlan item, same order
  // The storage of the items' draft_logprobs, sized by the executor once (it keeps its size).
  std::vector<TokenLogprobs> draft_logprobs;

  // Empties and sizes the result for a plan of `num_items` items, keeping capacity.
  void reset(size_t num_items) {
    items.clear();
    items.resize(num_items);
  }
};

}  // namespace drift
