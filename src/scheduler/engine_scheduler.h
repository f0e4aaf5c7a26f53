// The engine scheduler: sequence states, the waiting queue, and the composition of each step.
//
// The engine worker drives it, one step at a time, from one thread:
//
//   for (;;) {
//     for (request : gateway.new_requests())  scheduler.add(request)  // admitted by the judge
//     for (id : gateway.cancels())            emit(scheduler.cancel(id))
//     const StepPlan& plan = scheduler.schedule_step();
//     if (plan.empty()) { wait for requests; continue; }
//     Status s = executor.run(plan, result);
//     auto outcomes = s.ok() ? scheduler.on_step_executed(result)
//                            : scheduler.on_step_failed(s.error());
//     emit(outcomes);                       // tokens, finishes; pages are already released
//     if (!executor.healthy()) emit(scheduler.abort_all(make_error("executor failed")));
//   }
//
// A step gives every decoding sequence its token and fills the rest of the token budget with
// prefill chunks (or the other way round, see prefer_decode_over_prefill), never exceeding
// max_num_batched_tokens tokens or max_num_seqs sequences, nor the prefill token budget the
// engine sets from its latency targets (set_prefill_token_budget). A running long prefill leaves
// room for a short prompt at the head of the queue, and a waiting request blocked by KV pages or
// the partial-prefill limit may be passed by later ones that fit, a bounded number of times.
// Phases move only on what the executor
// reports. An embedding request (SequenceRequest::pooling) is a prefill that samples nothing: the
// outcome of its last chunk carries the executor's pooled vector and finishes it (kStop). Each
// sequence's pages are released exactly once, when it finishes, is cancelled, fails, or is
// preempted (then re-acquired on re-admission).
//
// With KV groups (kv/kv_layout.h), every step item carries a page list per group, and after each
// reported step a sequence's sliding groups free the pages that left their window
// (docs/design-notes.md "Sliding-window KV groups").
//
// With a prefix cache, an admitted sequence starts prefill after its longest cached page-aligned
// prefix — never its last token, so that there are logits to sample from — sharing those pages,
// and every full page a step completes is registered at once (so that requests running at the
// same time share it too). A waiting request whose next page a running prefill is computing
// waits for it rather than compute it twice (a burst of requests with one system prompt computes
// it once). Released pages stay cached until the pool needs them.
//
// With a disk tier under the prefix cache (kv/prefix_disk_tier.h), a waiting request whose cached
// prefix continues onto pages on disk waits while they are read back (other requests may pass
// it, as past one blocked by KV pages), then is admitted with them as a cached hit; every step
// boundary registers the pages whose reads finished. Steps never wait for the disk. A sequence
// preempted with a tier may have its pages swapped out to it instead of recomputed, by the cost
// model (scheduler/preemption_cost.h, engine_scheduler_preempt.cc); its re-admission reads them
// back the same way, its partial last page as a page copy in the admitting step's plan.
//
// After warm-up, schedule_step and on_step_executed perform no heap allocation in steady decode:
// the plan, the outcome list and every page list reuse memory sized at construction or admission.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/prefix_cache.h"
#include "kv/prefix_disk_tier.h"
#include "scheduler/admitted_request.h"
#include "scheduler/capacity_scheduler.h"
#include "scheduler/draft_proposer.h"
#include "scheduler/ngram_drafter.h"
#include "scheduler/ngram_pool.h"
#include "scheduler/scheduler_config.h"
#include "scheduler/sequence_state.h"
#include "scheduler/spec_auto_gate.h"
#include "scheduler/step_load.h"
#include "scheduler/step_plan.h"
#include "scheduler/waiting_order.h"
#include "util/error.h"
#include "util/function_ref.h"
#include "util/progress_log.h"

namespace drift {

// What happened to one sequence in a step (or on cancel/abort).
struct SequenceOutcome {
  SeqId id = 0;
  std::optional<TokenId> token;        // a newly generated token
  std::optional<FinishReason> finish;  // the sequence ended; its pages are already released
  std::string message;                 // for kError: what failed
  // The log-probabilities of `token`, when its request asked for them.
  std::optional<TokenLogprobs> logprobs;
  // An embedding request's pooled, L2-normalised vector, with its finish (kStop).
  std::vector<float> embedding{};
  // `token` is an end-of-sequence or stop token: it ends the output and adds no text. (A sequence
  // whose grammar completes also finishes kStop, but on a token of its text.)
  bool stop_token = false;
};

struct SchedulerStats {
  uint64_t steps = 0;  // non-empty plans
  uint64_t prefill_tokens = 0;
  uint64_t decode_tokens = 0;
  uint64_t finished = 0;  // stop, length, cancelled and error
  uint64_t cancelled = 0;
  uint64_t errors = 0;
  // Steps in which the head of the waiting queue waited for a page that a running prefill was
  // computing (to share it rather than compute it twice).
  uint64_t prefix_waits = 0;
  // Admissions that shared pages a running prefill writes in the same step (a burst of requests
  // with one system prompt: the prompt is computed once and every request answers after it).
  uint64_t prefix_shared_in_step = 0;
  // Admission attempts in which the request waited for its prefix's pages to be read from disk.
  uint64_t tier_waits = 0;
  // Requests held for room to read their whole run on disk (rather than read what fits and
  // compute the rest), and holds that lasted as long as computing would have and gave up.
  uint64_t room_holds = 0;
  uint64_t room_holds_expired = 0;
  // Preemptions by the way chosen (scheduler/preemption_cost.h), the seconds the cost model
  // predicted for each way summed over every choice (both figures of each), and the last choice.
  uint64_t preemptions_swapped = 0;
  uint64_t preemptions_recomputed = 0;
  double predicted_swap_seconds = 0;
  double predicted_recompute_seconds = 0;
  std::optional<PreemptionChoice> last_preemption;
  // Swapped sequences re-admitted with their partial last page read back (not recomputed).
  uint64_t swapped_tails_restored = 0;
  // --spec auto (SpecAutoGate): measured decode steps in which drafts were allowed, and in which
  // they were not.
  uint64_t spec_auto_steps_with_drafts = 0;
  uint64_t spec_auto_steps_without_drafts = 0;
  // Speculative decoding: decode items that carried a draft, their draft tokens, the drafts the
  // executor accepted, and those by position in their draft (vLLM's per-position counts).
  uint64_t spec_drafts = 0;
  uint64_t spec_draft_tokens = 0;
  uint64_t spec_accepted_tokens = 0;
  std::array<uint64_t, kMaxSpecDraftTokens> spec_accepted_by_position{};
  // Draft tokens that came from the pool shared across requests, and of those the accepted.
  uint64_t spec_pool_draft_tokens = 0;
  uint64_t spec_pool_accepted_tokens = 0;
  // Draft tokens a grammar forced, and of those the accepted.
  uint64_t spec_forced_draft_tokens = 0;
  uint64_t spec_forced_accepted_tokens = 0;
  // Draft tokens the draft model proposed (and were verified), and of those the accepted.
  uint64_t spec_draft_model_draft_tokens = 0;
  uint64_t spec_draft_model_accepted_tokens = 0;
};

class EngineScheduler {
 public:
  // `kv`, `log`, `prefix_cache` (over `kv`; nullptr: no prefix caching) and `tier` (under the
  // prefix cache; nullptr: none) must outlive the scheduler. `eos_token_ids` are the model's
  // end-of-sequence tokens (a request may ignore them, see SamplingParams::ignore_eos).
  // `draft_model` (nullptr: none; must outlive the scheduler) proposes drafts under
  // SpecMode::kDraft, which needs one, and kAuto.
  static Expected<std::unique_ptr<EngineScheduler>> create(const SchedulerConfig& config,
                                                           std::vector<TokenId> eos_token_ids,
                                                           KVCacheManager& kv, ProgressLog& log,
                                                           PrefixCache* prefix_cache = nullptr,
                                                           PrefixDiskTier* tier = nullptr,
                                                           DraftProposer* draft_model = nullptr);
  // The page rows a step of `items` sequences can take from the pool at most: its tokens' rows
  // and two a sequence (the disk tier's staging is sized by it before the scheduler exists).
  static int32_t rows_one_step_takes(const SchedulerConfig& config, int32_t page_size,
                                     int32_t items);

  // Queues a request the engine's judge admitted. It never refuses: what could never run was
  // refused by the judge, and what an admitted request promises (admitted_request.h) is asserted
  // here and checked by check_invariants().
  void add(AdmittedRequest request);

  // Ends the sequence in whatever phase, freeing everything it holds, and returns its outcome
  // (finish = kCancelled). nullopt if the id is not known (never added, already finished or
  // already cancelled). A sequence in the outstanding plan is reported cancelled at once, but its
  // pages and token storage — which the executor may be reading — are released when the plan is
  // reported, and that report says nothing more about it.
  std::optional<SequenceOutcome> cancel(SeqId id) {
    return end_early(id, FinishReason::kCancelled);
  }
  // As cancel, for a sequence whose output the engine found complete by a rule it applies to the
  // text (a stop string): its outcome, stats and progress log say kStop, and its full pages stay
  // cached as any finished sequence's do. (In the outstanding plan, the later release counts as
  // a cancel.)
  std::optional<SequenceOutcome> stop(SeqId id) { return end_early(id, FinishReason::kStop); }

  // Composes the next step. The plan is valid until it is reported with on_step_executed or
  // on_step_failed; until then, calling schedule_step again returns the same plan. An empty plan
  // means there is nothing to run.
  const StepPlan& schedule_step();

  // Applies the executor's report on the outstanding plan: advances computed tokens, appends
  // sampled tokens, moves phases, finishes sequences (stop token, max tokens, item error) and
  // releases their pages. The span is valid until the next call into the scheduler. A result of
  // the wrong size fails the whole step.
  std::span<const SequenceOutcome> on_step_executed(const ExecutionResult& result);
  // The wall time of the step last reported to on_step_executed, measured by the engine (the
  // scheduler reads no clock). --spec auto judges drafts by it (scheduler/spec_auto_gate.h);
  // otherwise it is not needed.
  void observe_step_seconds(double seconds);
  // The whole step failed: every sequence in the plan ends with `error`.
  std::span<const SequenceOutcome> on_step_failed(const Error& error);
  // Ends every sequence, waiting or running, with `error` (executor lost, engine aborting), and
  // flushes the prefix cache: K/V written by a failing executor is not trusted.
  std::span<const SequenceOutcome> abort_all(const Error& error);

  // The prefill tokens each following step may carry besides its decodes, clamped to
  // [1, max_num_batched_tokens] (initially max_num_batched_tokens). The engine sets it before
  // each step from its step cost model and latency targets; the scheduler never reads a clock.
  // Prompts prefilled whole (no chunking) ignore it, or they could never start.
  void set_prefill_token_budget(int32_t tokens);
  int32_t prefill_token_budget() const { return prefill_token_budget_; }
  // What recomputing a preempted sequence costs per token, from the engine's step cost model
  // (unmeasured until set: the cost model then recomputes, see preemption_cost.h).
  void set_recompute_costs(const RecomputeCosts& costs) { recompute_costs_ = costs; }
  // What the next step's cost depends on (O(sequences), no allocation).
  StepLoad load() const;

  // Evicts every cached page (pages that sequences hold stay registered). Returns how many; 0
  // without a prefix cache.
  int32_t flush_prefix_cache() { return prefix_ ? prefix_->flush() : 0; }

  // ---- Introspection ----
  const SchedulerConfig& config() const { return config_; }
  uint64_t current_step() const { return step_; }  // the number the next plan will carry
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  // Appends the ids of the waiting sequences that have generated nothing yet (never admitted,
  // or preempted before their first token) to `out`.
  void waiting_not_started(std::vector<SeqId>& out) const;
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  bool has_unfinished() const { return !seqs_.empty(); }
  const SequenceState* find(SeqId id) const;
  // Calls `visit` on every unfinished sequence: the running ones in run order, then the waiting
  // ones in admission order (for a live view of the engine; no allocation).
  void for_each_sequence(FunctionRef<void(const SequenceState&)> visit) const {
    for (const SequenceState* seq : running_) visit(*seq);
    for (const SequenceState* seq : waiting_) visit(*seq);
  }
  std::span<const PageId> pages(SeqId id) const { return kv_.pages(id); }
  const SchedulerStats& stats() const { return stats_; }
  const CapacityStats& capacity_stats() const { return capacity_.stats(); }
  const PrefixCache* prefix_cache() const { return prefix_; }
  const NgramPool& ngram_pool() const { return pool_; }
  const PrefixDiskTier* disk_tier() const { return tier_; }
  // The KV (and prefix cache) invariants plus the scheduler's own: every sequence keeping what
  // its admission promised (admitted_request.h), in exactly the queue its phase says, queues
  // sorted, budgets of the running set respected, KV held exactly by running sequences and
  // matching their computed tokens when no plan is outstanding.
  Status check_invariants() const;

 private:
  EngineScheduler(const SchedulerConfig& config, std::vector<TokenId> eos_token_ids,
                  KVCacheManager& kv, ProgressLog& log, PrefixCache* prefix_cache,
                  PrefixDiskTier* tier, DraftProposer* draft_model);

  std::optional<SequenceOutcome> end_early(SeqId id, FinishReason reason);
  // Whether `seq` keeps what an AdmittedRequest promises, as add() built it.
  Status check_admitted(const SequenceState& seq) const;

  // Step composition, one phase each.
  void begin_step();
  void schedule_decodes();
  void schedule_running_prefills();
  void schedule_admissions();
  void end_step();

  enum class Admission : uint8_t {
    kAdmitted,  // erased from waiting_ and scheduled
    kBlocked,   // lacks KV pages, a partial-prefill slot or budget: later requests may pass it
    kStop,      // waits for a page in flight: admission order is kept
  };
  Admission try_admit(size_t waiting_index);

  // Helpers.
  // The tokens of `pending` a prefill chunk takes in this step (0: none fit).
  int32_t prefill_chunk_limit(int32_t pending, bool past_prefill_budget = false) const;
  // The most pages the step being planned can take from the pool (the disk tier writes that
  // many of the pool's next evictions ahead).
  int32_t max_pages_one_step_takes() const;
  CachedPrefix find_cached_prefix(const SequenceState& seq);
  // Whether `seq` waits for the disk tier to read the pages after its cached `prefix` (asking
  // it once per admission).
  bool waits_for_disk(SequenceState& seq, const CachedPrefix& prefix);
  // Whether `seq`, whose whole run on disk (`offer`, after `prefix`) the pool cannot take now,
  // waits for room rather than loading what fits and computing the rest; starts its hold.
  bool holds_for_room(SequenceState& seq, const CachedPrefix& prefix,
                      const PrefixDiskTier::Offer& offer);
  // Whether any request may hold for room now (before its run is known).
  bool may_hold_for_room() const;
  // Pages after the cached prefix that a running prefill is computing and `seq` could share.
  struct PagesInFlight {
    const SequenceState* writer = nullptr;  // none: nothing to wait for or share
    int32_t num_pages = 0;                  // shareable pages from the cached prefix on
    bool written_this_step = false;         // the writer's item in this step writes all of them
  };
  PagesInFlight pages_in_flight(const SequenceState& seq, int32_t cached_pages) const;
  // Extends `prefix` (prefix_pages_) by the `num_pages` pages after it that `writer`'s item of
  // this step writes; false if a page the sequence would read is no longer held (never expected).
  bool share_pages_in_flight(CachedPrefix& prefix, const SequenceState& writer, int32_t num_pages);
  // Points `prefix.pages` at prefix_pages_ and counts the pages that leave the pool or count in
  // the sequence's promise.
  void count_prefix_pages(CachedPrefix& prefix) const;
  void cache_full_pages(SequenceState& seq);
  void free_outside_windows(const SequenceState& seq);
  // KV-Compress: orders the compression of the sequence of plan item `item` after the step when
  // its excess over its target reaches a page; applies it to the KV pages once the step ran.
  void plan_kv_compression(const SequenceState& seq, int32_t item);
  Status apply_kv_compression(SequenceState& seq, const KvCompression& compression);
  void release_kv_table(const SequenceState& seq);
  // Preemption (engine_scheduler_preempt.cc).
  bool make_room(SequenceState& seq, int64_t tokens);
  void preempt(size_t running_index);
  // Swap or recompute for `seq` (running, not in this step), by the policy and the cost model;
  // a swap writes its pages to the tier before they are released.
  PreemptionChoice swap_out_or_recompute(const SequenceState& seq);
  // The tokens of `seq`'s partial last page that the tier read back, if that page is the next
  // after `prefix` (0: none; a tail that is not next is let go); restore_swapped_tail binds it to
  // the admitted sequence as a copy of the tier's page in this step's plan.
  int32_t swapped_tail_tokens(const SequenceState& seq, const CachedPrefix& prefix);
  void restore_swapped_tail(SequenceState& seq);
  // `drafts`: a decode item's drafts, after its one token (speculative decoding).
  void add_item(SequenceState& seq, int32_t num_tokens, std::span<const TokenId> drafts = {});
  // Speculative decoding (engine_scheduler_spec.cc): the step's draft tokens; a decoding
  // sequence's draft (in draft_scratch_) within `room` tokens, leaving `later_decodes` a page
  // each; after the step, the rejected drafts' slots returned and the accepted tokens committed.
  int32_t plan_draft_budget();
  int32_t draft_for(SequenceState& seq, int32_t room, int32_t later_decodes);
  // Before the decodes are placed: the draft model's drafts of every decoding sequence that may
  // carry one and has no long n-gram match, in one batch (into SequenceState::model_draft).
  void ask_draft_model();
  // Writes the sequence's draft (at most out.size() tokens) from the best source it has.
  int32_t propose_draft(SequenceState& seq, std::span<TokenId> out);
  Status roll_back_drafts(SequenceState& seq);
  void count_verified(SequenceState& seq, const StepItem& item, int32_t accepted);
  // Appends the item's accepted drafts and its sampled token, each as a decode step would; the
  // first that ends the sequence drops those after it.
  void commit_tokens(SequenceState& seq, const StepItem& item, const ItemResult& result);
  // Appends one generated token; true if it ended the sequence (which is then gone).
  bool commit_token(SequenceState& seq, TokenId token,
                    const std::optional<TokenLogprobs>& logprobs);
  void admit(SequenceState& seq, const CachedPrefix& prefix);
  void enqueue_waiting(SequenceState& seq);
  void finish(SequenceState& seq, FinishReason reason, std::string message);
  void retire(SequenceState& seq, FinishReason reason);
  bool is_stop_token(const SequenceState& seq, TokenId token) const;
  // Advances the sequence's grammar (if any) past a committed token.
  Status advance_constraint(SequenceState& seq, TokenId token);

  SchedulerConfig config_;
  std::vector<TokenId> eos_token_ids_;
  KVCacheManager& kv_;
  ProgressLog& log_;
  PrefixCache* prefix_;   // nullptr: no prefix caching
  PrefixDiskTier* tier_;  // nullptr: no disk tier
  CapacityScheduler capacity_;
  std::unique_ptr<WaitingOrder> waiting_order_;

  std::unordered_map<SeqId, SequenceState> seqs_;  // every unfinished sequence
  std::vector<SequenceState*> waiting_;            // sorted by waits_before
  std::vector<SequenceState*> running_;            // prefill + decode, sorted by runs_before

  uint64_t step_ = 0;
  uint64_t next_arrival_order_ = 0;
  bool plan_outstanding_ = false;
  StepPlan plan_;
  std::vector<SequenceOutcome> outcomes_;
  SchedulerStats stats_;
  // Scratch of find_cached_prefix, [pages][kv groups], sized at construction.
  std::vector<PageId> prefix_pages_;
  std::vector<PageId> page_row_;  // [kv groups] scratch of cache_full_pages
  // Compressed sequences ended since the last plan: the next plan tells the executor.
  std::vector<SeqId> kv_tables_to_release_;
  NgramDraftConfig ngram_;
  NgramPool pool_;                           // drafts shared across requests (empty: none)
  std::vector<TokenId> draft_scratch_;       // [spec.max_draft_tokens] one sequence's draft
  SpecAutoGate spec_gate_;                   // --spec auto's judge of drafts
  DraftProposer* draft_model_;               // nullptr: no draft model
  std::vector<DraftAsk> draft_asks_;         // [max_num_seqs] scratch of ask_draft_model
  std::vector<SequenceState*> draft_asked_;  // [max_num_seqs] the sequence of each ask
  // The step last executed, for observe_step_seconds: its decoding sequences as the draft budget
  // counted them (0: no decode, or prefill in it: not measured) and the tokens it committed.
  int32_t step_decoding_ = 0;
  int32_t executed_decoding_ = 0;
  int64_t executed_committed_ = 0;

  // The step being composed.
  int32_t token_budget_ = 0;        // tokens still free in this step
  int32_t draft_budget_ = 0;        // draft tokens still free in this step
  int32_t partial_prefills_ = 0;    // sequences that will end this step with an unfinished prefill
  int32_t prefill_token_budget_;    // set_prefill_token_budget
  RecomputeCosts recompute_costs_;  // set_recompute_costs
  double executed_seconds_ = 0;     // every step's observe_step_seconds, summed
  int32_t prefill_budget_ = 0;      // prefill tokens still free in this step
  // Prefill tokens running prefills leave for the short prompt at the head of the queue.
  int32_t held_for_waiting_head_ = 0;
  // Pages kept from admissions for the decodes still to be scheduled in this step (prefill-first
  // optimistic mode), so that admitting a request never preempts a running one in the same step.
  int64_t decode_pages_held_back_ = 0;
  // No running sequence decodes: the prefill budget only bounds how long arrivals wait for the
  // next step (latency_planner.h), so a request joining the step that writes its prefix may go
  // beyond it.
  bool none_decoding_ = false;
};

}  // namespace drift
