// A model-free executor for scheduler tests, and a driver that runs the worker loop over it.
//
// The fake "model" produces the next token as a hash of (sequence id, every token so far), so a
// sequence's output depends only on its own history: a preempted-and-recomputed sequence, or one
// run among others, must produce exactly the tokens of an uninterrupted solo run.
//
// The fake executor also checks what a real one relies on: token ids and positions match the
// sequence's history, slot mapping matches the block table, and the K/V that an item attends over
// (positions before its chunk; in a sliding-window KV group only those its window sees) are in the
// pages each group's block table names — a freed page is never read. It keeps a shadow of every
// slot — the group, position and token written there and a hash of the whole prefix up to it,
// which is what K/V depends on — and verifies each read against the reader's own history and
// group, so a page that
// was evicted, reused or rewritten under a live sequence (or a wrong prefix cache hit) fails the
// read. Every page of a plan must be in use, and no step may write into a page that another
// sequence holds (shared pages are read-only), except to fill a page that other items of the same
// step share to read it (a request joining the step that computes its prefix): as a real executor,
// the fake performs every write of a step before its reads.
//
// A decode item with drafts (speculative decoding) writes every token's slot, drafts included,
// and verifies the drafts against the fake model one position at a time; a rejected draft's slot
// holds its token, so a later read of that position before the slot is rewritten fails.
//
// A compressed item (KV-Compress) keeps, per sequence, the position each of its slots holds (one
// table: the fake model has one head) and is checked the same way through it; the plan's
// compressions run with a known attention — position p's metric is known_attention(p) — through
// the real policy, moving slots down as the CPU executor moves K/V, so a test can predict exactly
// which positions a sequence keeps.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_eviction.h"
#include "scheduler/engine_scheduler.h"
#include "scheduler/executor.h"
#include "test_admission.h"

namespace drift::testing {

struct FakeModel {
  int32_t vocab = 1000;
  TokenId eos = 0;
  // About one sampled token in eos_one_in is the EOS token; nullopt: never.
  std::optional<uint32_t> eos_one_in;
  // The next token depends on the last `order` tokens only (0: on all of them). With a small
  // vocabulary the output soon repeats itself, as text that speculative decoding's n-gram drafts
  // predict does — wrongly at times when the drafts' matches are shorter than the order.
  int32_t order = 0;
  // The next token does not depend on the sequence either, as a real model's does not: equal
  // histories continue alike in every sequence (what drafts shared across requests predict).
  bool same_for_every_sequence = false;
  // A draft model that is sometimes wrong: about one token in differ_one_in is the next token
  // id instead of the one a model without it gives (nullopt: never).
  std::optional<uint32_t> differ_one_in;

  TokenId next_token(SeqId seq, std::span<const TokenId> history) const {
    uint64_t h = 1469598103934665603ull;
    if (!same_for_every_sequence) h ^= seq * 0x9E3779B97F4A7C15ull;
    if (order > 0 && history.size() > size_t(order)) history = history.last(size_t(order));
    for (TokenId t : history) h = (h ^ uint64_t(uint32_t(t))) * 1099511628211ull;
    h ^= h >> 29;
    if (eos_one_in && h % *eos_one_in == 0) return eos;
    const TokenId t = 1 + TokenId(h % uint64_t(vocab - 1));
    if (differ_one_in && (h >> 17) % *differ_one_in == 0) return t == vocab - 1 ? 1 : t + 1;
    return t;
  }

  // What FakeExecutor pools for a prompt into `dim` floats.
  static std::vector<float> embedding(std::span<const TokenId> prompt, size_t dim) {
    std::vector<float> out(dim, 0.0f);
    for (TokenId t : prompt)
      for (size_t j = 0; j < dim; ++j) out[j] += float(j + 1) * float(t);
    return out;
  }

  // What `seq` generates alone, honouring EOS (unless ignored), stop tokens and max_new_tokens.
  std::vector<TokenId> reference(SeqId seq, std::vector<TokenId> history, int32_t max_new_tokens,
                                 const SamplingParams& sampling = {}) const {
    std::vector<TokenId> out;
    while (int32_t(out.size()) < max_new_tokens) {
      TokenId t = next_token(seq, history);
      out.push_back(t);
      history.push_back(t);
      bool stop = (!sampling.ignore_eos && t == eos) ||
                  std::find(sampling.stop_token_ids.begin(), sampling.stop_token_ids.end(), t) !=
                      sampling.stop_token_ids.end();
      if (stop) break;
    }
    return out;
  }
};

// The fake executor's attention: the metric of position p at every compression.
inline float known_attention(int32_t p) { return float((uint32_t(p) * 2654435761u) >> 8); }

// Its KV pages are its shadow slots, page_size of them a page: a disk tier that copies a page's
// bytes out and back copies exactly what the reads check.
class FakeExecutor : public Executor, public KVPageMemory {
 public:
  FakeExecutor(const KVCacheManager& kv, FakeModel model, KvCompressConfig compress = {})
      : kv_(kv),
        compress_(compress),
        model_(model),
        page_size_(kv.page_size()),
        slots_(size_t(kv.num_pages()) * page_size_) {}

  Status run(const StepPlan& plan, ExecutionResult& result) override {
    ++steps_run_;
    if (fail_step_ && *fail_step_ == plan.step) return make_error("injected step failure");
    check_plan(plan);
    for (const PageCopy& c : plan.page_copies) {
      for (int32_t i = 0; i < page_size_; ++i)
        slots_[size_t(c.dst) * page_size_ + i] = slots_[size_t(c.src) * page_size_ + i];
    }
    for (SeqId id : plan.kv_tables_released) tables_.erase(id);
    result.reset(plan.items.size());
    auto fails = [&](const StepItem& item) {
      return fail_item_ && fail_item_->first == plan.step && fail_item_->second == item.seq_id;
    };
    // A real executor stores every token's K/V of a layer before any token of it attends
    // (executor.h): all writes first, then all reads.
    for (size_t i = 0; i < plan.items.size(); ++i) {
      const StepItem& item = plan.items[i];
      if (item.kv_compressed || fails(item)) continue;
      for (int32_t g = 0; g < plan.kv_groups; ++g) write_group(plan, i, g);
    }
    for (size_t i = 0; i < plan.items.size(); ++i) {
      const StepItem& item = plan.items[i];
      if (item.kv_compressed) {
        run_compressed(plan, item, result.items[i]);
        continue;
      }
      if (fails(item)) {
        result.items[i].error = Error{"injected item failure"};
        continue;
      }
      for (int32_t g = 0; g < plan.kv_groups; ++g) read_group(plan, item, g);
      if (item.sample) verify(plan, item, result.items[i]);
      if (item.pooling != PoolingMode::kNone) pool(item, result.items[i]);
    }
    for (const KvCompression& c : plan.kv_compressions) compress(plan, c);
    return Status::Ok();
  }

  // The token after the item's committed tokens, after as many of its drafts as the fake model
  // agrees with, one position at a time.
  void verify(const StepPlan& plan, const StepItem& item, ItemResult& r) {
    const size_t committed = size_t(item.context_len() - item.num_drafts);
    std::vector<TokenId> history(item.history.begin(), item.history.begin() + committed);
    std::span<const TokenId> drafts = plan.tokens(item).last(size_t(item.num_drafts));
    for (int32_t j = 0;; ++j) {
      const TokenId t = model_.next_token(item.seq_id, history);
      if (j < item.num_drafts && t == drafts[size_t(j)]) {
        history.push_back(t);
        continue;
      }
      r.token = t;
      r.accepted_drafts = j;
      return;
    }
  }

  // The positions the slots of a compressed sequence hold (empty if none).
  std::vector<int32_t> kv_table(SeqId seq) const {
    auto it = tables_.find(seq);
    return it == tables_.end() ? std::vector<int32_t>{} : it->second;
  }
  int64_t compressions_run() const { return compressions_run_; }

  // The fake pooling: element j of an embedding sums (j + 1) * token over every prompt token,
  // folded chunk by chunk as a real executor folds hidden states (afresh at position 0), so a
  // lost, repeated or skipped chunk changes it. See FakeModel::embedding.
  void pool(const StepItem& item, ItemResult& r) {
    if (item.start_position == 0) std::fill(item.embedding.begin(), item.embedding.end(), 0.0f);
    for (int32_t p = item.start_position; p < item.context_len(); ++p)
      for (size_t j = 0; j < item.embedding.size(); ++j)
        item.embedding[j] += float(j + 1) * float(item.history[size_t(p)]);
    r.embedded = item.completes_embedding() && report_embeddings_;
  }
  // Whether the executor reports the embeddings it completes (false: a broken executor).
  void report_embeddings(bool on) { report_embeddings_ = on; }

  bool healthy() const override { return healthy_; }
  KVPageMemory* page_memory() override { return this; }
  uint64_t page_bytes() const override { return sizeof(Slot) * size_t(page_size_); }
  std::span<uint8_t> page(PageId page) override {
    return {reinterpret_cast<uint8_t*>(slots_.data() + size_t(page) * size_t(page_size_)),
            page_bytes()};
  }

  void fail_step(uint64_t step) { fail_step_ = step; }
  void fail_item(uint64_t step, SeqId seq) { fail_item_ = {step, seq}; }
  void set_healthy(bool healthy) { healthy_ = healthy; }
  uint64_t steps_run() const { return steps_run_; }

 private:
  struct Slot {
    SeqId seq = ~SeqId{0};  // the writer, for messages only: shared pages are read by others
    int32_t group = -1;     // the KV group whose layers wrote it
    int32_t position = -1;
    TokenId token = -1;
    uint64_t prefix = 0;  // hash of the writer's tokens at positions 0..position
  };

  static constexpr uint64_t kPrefixSeed = 0x243F6A8885A308D3ull;
  static uint64_t extend(uint64_t prefix, TokenId t) {
    return (prefix ^ uint64_t(uint32_t(t))) * 0x100000001B3ull + 0x9E3779B97F4A7C15ull;
  }

  // The first position a query at `position` sees in group `group` (0: every one before it).
  int32_t first_seen(int32_t group, int32_t position) const {
    const KVGroup kind = kv_.layout().group(group);
    return kind.sliding() ? std::max(0, position - kind.sliding_window + 1) : 0;
  }

  // One group of an uncompressed item: attention reads every earlier position the group's
  // queries see through the group's block table, from pages in use.
  void read_group(const StepPlan& plan, const StepItem& item, int32_t g) {
    std::span<const PageId> pages = plan.group_pages(item, g);
    for (PageId page : pages) {
      if (page != kNoPage && kv_.page_state(page) != PageState::kUsed)
        ADD_FAILURE() << "step " << plan.step << " seq " << item.seq_id << " attends over page "
                      << page << ", which no sequence holds";
    }
    uint64_t prefix = kPrefixSeed;
    const int32_t from = first_seen(g, item.start_position);
    for (int32_t p = 0; p < item.start_position; ++p) {
      prefix = extend(prefix, item.history[size_t(p)]);
      if (p < from) continue;
      if (pages[size_t(p / page_size_)] == kNoPage) {
        ADD_FAILURE() << "step " << plan.step << " seq " << item.seq_id << " group " << g
                      << " reads position " << p << " from a freed page";
        return;
      }
      const Slot& s = slot(pages, p);
      if (s.prefix != prefix || s.position != p || s.token != item.history[size_t(p)] ||
          s.group != g) {
        ADD_FAILURE() << "step " << plan.step << " seq " << item.seq_id << " group " << g
                      << " reads position " << p << " from a slot holding position " << s.position
                      << " of seq " << s.seq << " group " << s.group
                      << (s.prefix != prefix ? " with another prefix" : "");
        return;
      }
    }
  }

  // One group of uncompressed item `i`: writes the K/V of its tokens into pages no other
  // sequence holds — or holds only to read them in this very step (it shares the prefix this
  // item computes).
  void write_group(const StepPlan& plan, size_t i, int32_t g) {
    const StepItem& item = plan.items[i];
    std::span<const PageId> pages = plan.group_pages(item, g);
    uint64_t prefix = kPrefixSeed;
    for (int32_t p = 0; p < item.start_position; ++p)
      prefix = extend(prefix, item.history[size_t(p)]);
    for (int32_t k = 0; k < item.num_tokens; ++k) {
      int32_t p = item.start_position + k;
      PageId page = pages[size_t(p / page_size_)];
      if (page == kNoPage || kv_.refcount(page) != 1 + same_step_readers(plan, i, page))
        ADD_FAILURE() << "step " << plan.step << " seq " << item.seq_id << " writes position " << p
                      << " into page " << page << " with refcount "
                      << (page == kNoPage ? 0 : kv_.refcount(page));
      if (page == kNoPage) return;
      const TokenId token = plan.token_ids[size_t(item.token_offset + k)];  // a draft's too
      prefix = extend(prefix, token);
      slot(pages, p) = Slot{item.seq_id, g, p, token, prefix};
    }
  }

  // A compressed item: reads each slot through the sequence's table (in every group alike, but
  // for a sliding group's slots below its window, which may have no page), writes the next slots.
  void run_compressed(const StepPlan& plan, const StepItem& item, ItemResult& r) {
    auto [it, created] = tables_.try_emplace(item.seq_id);
    std::vector<int32_t>& table = it->second;
    if (created)
      for (int32_t p = 0; p < item.kv_slots; ++p) table.push_back(p);
    ASSERT_EQ(int32_t(table.size()), item.kv_slots) << "seq " << item.seq_id;
    for (int32_t g = 0; g < plan.kv_groups; ++g) {
      std::span<const PageId> pages = plan.group_pages(item, g);
      for (int32_t j = 0; j < item.kv_slots; ++j) {
        const int32_t p = table[size_t(j)];
        if (p < first_seen(g, item.start_position)) continue;
        ASSERT_NE(pages[size_t(j / page_size_)], kNoPage)
            << "step " << plan.step << " seq " << item.seq_id << " reads a freed page";
        const Slot& s = slot(pages, j);
        ASSERT_TRUE(s.position == p && s.token == item.history[size_t(p)])
            << "step " << plan.step << " seq " << item.seq_id << " group " << g << " reads slot "
            << j << " expecting position " << p << ", which holds position " << s.position;
      }
      for (int32_t k = 0; k < item.num_tokens; ++k) {
        const int32_t at = item.kv_slots + k, p = item.start_position + k;
        const PageId page = pages[size_t(at / page_size_)];
        if (kv_.refcount(page) != 1)
          ADD_FAILURE() << "step " << plan.step << " seq " << item.seq_id << " writes slot " << at
                        << " into page " << page << " with refcount " << kv_.refcount(page);
        slot(pages, at) = Slot{item.seq_id, g, p, item.history[size_t(p)], 0};
      }
    }
    for (int32_t k = 0; k < item.num_tokens; ++k) table.push_back(item.start_position + k);
    if (item.sample)
      r.token = model_.next_token(item.seq_id, item.history.first(size_t(item.context_len())));
  }

  // A planned compression through the real policy with the known attention; the kept slots move
  // down, into pages that only this sequence holds.
  void compress(const StepPlan& plan, const KvCompression& c) {
    const StepItem& item = plan.items[size_t(c.item)];
    std::vector<int32_t>& table = tables_[item.seq_id];
    std::vector<float> metric;
    for (int32_t p : table) metric.push_back(known_attention(p));
    std::vector<int32_t> kept;
    select_kept_entries(compress_, c.positions, c.keep_from, table, metric, c.num_slots, kept);
    ASSERT_EQ(int32_t(kept.size()), c.num_slots) << "seq " << item.seq_id;
    for (int32_t g = 0; g < plan.kv_groups; ++g) {
      std::span<const PageId> pages = plan.group_pages(item, g);
      for (size_t j = 0; j < kept.size(); ++j) {
        if (kept[j] == int32_t(j)) continue;
        const PageId page = pages[j / size_t(page_size_)];
        if (page == kNoPage || kv_.refcount(page) != 1 || kv_.cacheable(page))
          ADD_FAILURE() << "compression of seq " << item.seq_id << " writes shared page " << page;
        if (page == kNoPage) return;
        slot(pages, int32_t(j)) = slot(pages, kept[j]);
      }
    }
    for (size_t j = 0; j < kept.size(); ++j) table[j] = table[size_t(kept[j])];
    table.resize(kept.size());
    ++compressions_run_;
  }

  // Items of the plan other than `writer` that hold `page` (in any group) wholly before their
  // chunk: they only read it, after this step's writes.
  int32_t same_step_readers(const StepPlan& plan, size_t writer, PageId page) const {
    int32_t readers = 0;
    for (size_t j = 0; j < plan.items.size(); ++j) {
      if (j == writer) continue;
      for (int32_t g = 0; g < plan.kv_groups; ++g) {
        std::span<const PageId> pages = plan.group_pages(plan.items[j], g);
        for (size_t k = 0; k < pages.size(); ++k)
          if (pages[k] == page && int32_t(k + 1) * page_size_ <= plan.items[j].start_position)
            ++readers;
      }
    }
    return readers;
  }

  Slot& slot(std::span<const PageId> pages, int32_t position) {
    return slots_[size_t(pages[size_t(position / page_size_)]) * page_size_ +
                  position % page_size_];
  }

  // The plan's structure, as documented in step_plan.h.
  void check_plan(const StepPlan& plan) {
    int32_t offset = 0, page_offset = 0, prefill = 0, decode = 0, drafts = 0;
    std::set<SeqId> seen;
    ASSERT_EQ(plan.page_size, page_size_);
    for (const StepItem& item : plan.items) {
      ASSERT_TRUE(seen.insert(item.seq_id).second) << "sequence scheduled twice in one step";
      ASSERT_EQ(item.token_offset, offset);
      ASSERT_EQ(item.page_offset, page_offset);
      ASSERT_GT(item.num_tokens, 0);
      ASSERT_NE(item.sampling, nullptr);
      ASSERT_EQ(item.num_pages, (item.kv_slots + item.num_tokens + page_size_ - 1) / page_size_);
      ASSERT_EQ(plan.kv_groups, kv_.layout().num_groups());
      if (!item.kv_compressed) ASSERT_EQ(item.kv_slots, item.start_position);
      const int32_t committed = item.context_len() - item.num_drafts;
      ASSERT_LE(size_t(committed), item.history.size());
      ASSERT_EQ(item.sample,
                size_t(committed) == item.history.size() && item.pooling == PoolingMode::kNone);
      if (item.pooling != PoolingMode::kNone) ASSERT_FALSE(item.embedding.empty());
      if (item.kind == StepItemKind::kDecode) {
        ASSERT_EQ(item.num_tokens, 1 + item.num_drafts);
        ASSERT_TRUE(item.sample);
        ++decode;
      } else {
        ASSERT_EQ(item.num_drafts, 0);
        prefill += item.num_tokens;
      }
      drafts += item.num_drafts;
      for (int32_t k = 0; k < item.num_tokens; ++k) {
        int32_t p = item.start_position + k;
        size_t flat = size_t(item.token_offset + k);
        if (p < committed) ASSERT_EQ(plan.token_ids[flat], item.history[size_t(p)]);
        const int32_t at = item.kv_slots + k;
        for (int32_t g = 0; g < plan.kv_groups; ++g) {
          std::span<const PageId> pages = plan.group_pages(item, g);
          ASSERT_EQ(plan.slot(item, k, g),
                    int64_t(pages[size_t(at / page_size_)]) * page_size_ + at % page_size_);
        }
      }
      offset += item.num_tokens;
      page_offset += item.num_pages * plan.kv_groups;
    }
    ASSERT_EQ(offset, plan.num_tokens());
    ASSERT_EQ(size_t(page_offset), plan.block_table.size());
    ASSERT_EQ(prefill, plan.num_prefill_tokens);
    ASSERT_EQ(decode, plan.num_decode_tokens);
    ASSERT_EQ(drafts, plan.num_draft_tokens);
  }

  const KVCacheManager& kv_;
  KvCompressConfig compress_;
  FakeModel model_;
  int32_t page_size_;
  std::map<SeqId, std::vector<int32_t>> tables_;  // compressed sequences: position of each slot
  int64_t compressions_run_ = 0;
  std::vector<Slot> slots_;
  std::optional<uint64_t> fail_step_;
  std::optional<std::pair<uint64_t, SeqId>> fail_item_;
  bool healthy_ = true;
  bool report_embeddings_ = true;
  uint64_t steps_run_ = 0;
};

// What happened to one request, as the engine would see it.
struct RequestRecord {
  SequenceRequest request;  // as submitted (the prompt is kept here for reference outputs)
  uint64_t arrival_step = 0;
  std::optional<uint64_t> first_scheduled_step;
  std::vector<TokenId> generated;
  std::vector<float> embedding;
  std::optional<FinishReason> finish;
  std::string message;
  bool ended_on_stop_token = false;  // the last token was a stop token (no text)
};

// Runs the worker loop over a KV cache, a scheduler and the fake executor, checking the budgets
// and the invariants after every step.
class Driver {
 public:
  // `prefix_cache`: the hash of a prefix cache over the KV pages, or none for no prefix caching.
  // `kv_groups`: the KV groups' windows (kv_layout.h), group 0 first; empty: one group.
  // `draft_model`: the scheduler's draft proposer (none: no draft model); outlives the driver.
  Driver(const SchedulerConfig& config, int32_t num_pages, int32_t page_size, FakeModel model = {},
         std::vector<TokenId> eos = {0}, std::optional<PrefixHashFn> prefix_cache = std::nullopt,
         std::vector<KVGroup> kv_groups = {}, DraftProposer* draft_model = nullptr)
      : kv_(make_kv(num_pages, page_size, std::move(kv_groups))),
        model_(model),
        prefix_(prefix_cache ? std::make_unique<PrefixCache>(kv_, *prefix_cache) : nullptr),
        scheduler_(make_scheduler(config, std::move(eos), draft_model)),
        executor_(kv_, model, config.kv_compress) {}

  // Submits a request the engine's judge would admit (test_admission.h): one it would refuse
  // fails the invariants checked after the next step.
  void submit(SequenceRequest request) {
    RequestRecord& r = records_[request.id];
    r.request = request;
    r.arrival_step = scheduler_->current_step();
    scheduler_->add(admitted(std::move(request)));
  }

  bool cancel(SeqId id) {
    std::optional<SequenceOutcome> o = scheduler_->cancel(id);
    if (o) apply(*o);
    return o.has_value();
  }

  // One worker-loop iteration. Returns the plan it ran (a copy, for inspection).
  StepPlan step() {
    const StepPlan& plan = scheduler_->schedule_step();
    const SchedulerConfig& c = scheduler_->config();
    EXPECT_LE(plan.num_tokens(), c.max_num_batched_tokens);
    EXPECT_LE(int32_t(plan.items.size()), c.max_num_seqs);
    max_tokens_in_a_step_ = std::max(max_tokens_in_a_step_, plan.num_tokens());
    for (const StepItem& item : plan.items) {
      RequestRecord& r = records_.at(item.seq_id);
      if (!r.first_scheduled_step) r.first_scheduled_step = plan.step;
    }
    StepPlan copy = plan;
    if (!plan.empty()) {
      Status s = executor_.run(plan, result_);
      std::span<const SequenceOutcome> outcomes =
          s.ok() ? scheduler_->on_step_executed(result_) : scheduler_->on_step_failed(s.error());
      for (const SequenceOutcome& o : outcomes) apply(o);
      if (!executor_.healthy()) {
        for (const SequenceOutcome& o : scheduler_->abort_all(Error{"executor lost"})) apply(o);
      }
    }
    Status inv = scheduler_->check_invariants();
    EXPECT_TRUE(inv.ok()) << "after step " << copy.step << ": " << inv.message();
    return copy;
  }

  // Steps until nothing is left; false if that takes more than `max_steps`.
  bool run_to_completion(int max_steps = 100000) {
    for (int i = 0; i < max_steps && scheduler_->has_unfinished(); ++i) step();
    return !scheduler_->has_unfinished();
  }

  void apply(const SequenceOutcome& o) {
    RequestRecord& r = records_.at(o.id);
    EXPECT_FALSE(r.finish) << "sequence " << o.id << " reported after it finished";
    if (o.token) r.generated.push_back(*o.token);
    if (!o.embedding.empty()) r.embedding = o.embedding;
    if (o.finish) {
      r.finish = o.finish;
      r.message = o.message;
      r.ended_on_stop_token = o.stop_token;
    }
  }

  // Every page free (after flushing the prefix cache), every refcount zero, nothing reserved.
  void expect_all_released() {
    if (prefix_) {
      prefix_->flush();
      EXPECT_EQ(prefix_->num_registered(), 0);
      Status s = prefix_->check_invariants();
      EXPECT_TRUE(s.ok()) << s.message();
    }
    EXPECT_EQ(kv_.num_free_pages(), kv_.num_pages());
    EXPECT_EQ(kv_.num_used_pages(), 0);
    EXPECT_EQ(kv_.num_cached_pages(), 0);
    EXPECT_EQ(kv_.num_reserved_pages(), 0);
    EXPECT_EQ(kv_.num_sequences(), 0);
    for (PageId p = 0; p < kv_.num_pages(); ++p) EXPECT_EQ(kv_.refcount(p), 0) << "page " << p;
    Status s = kv_.check_invariants();
    EXPECT_TRUE(s.ok()) << s.message();
  }

  std::vector<TokenId> reference(SeqId id) const {
    const RequestRecord& r = records_.at(id);
    return model_.reference(id, r.request.prompt, r.request.max_new_tokens, r.request.sampling);
  }

  KVCacheManager& kv() { return kv_; }
  PrefixCache* prefix_cache() { return prefix_.get(); }
  EngineScheduler& scheduler() { return *scheduler_; }
  FakeExecutor& executor() { return executor_; }
  ProgressLog& log() { return log_; }
  std::map<SeqId, RequestRecord>& records() { return records_; }
  int32_t max_tokens_in_a_step() const { return max_tokens_in_a_step_; }

 private:
  static KVCacheManager make_kv(int32_t num_pages, int32_t page_size, std::vector<KVGroup> groups) {
    KVLayout layout{.num_layers = 2, .num_kv_heads = 2, .head_dim = 8, .page_size = page_size};
    layout.groups = std::move(groups);
    auto kv = KVCacheManager::create(layout, num_pages);
    EXPECT_TRUE(kv.ok());
    return std::move(kv).value();
  }
  std::unique_ptr<EngineScheduler> make_scheduler(const SchedulerConfig& config,
                                                  std::vector<TokenId> eos,
                                                  DraftProposer* draft_model) {
    auto s = EngineScheduler::create(config, std::move(eos), kv_, log_, prefix_.get(), nullptr,
                                     draft_model);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    return std::move(s).value();
  }

  KVCacheManager kv_;
  ProgressLog log_;
  FakeModel model_;
  std::unique_ptr<PrefixCache> prefix_;
  std::unique_ptr<EngineScheduler> scheduler_;
  FakeExecutor executor_;
  ExecutionResult result_;
  std::map<SeqId, RequestRecord> records_;
  int32_t max_tokens_in_a_step_ = 0;
};

inline SequenceRequest make_request(SeqId id, int32_t prompt_len, int32_t max_new_tokens,
                                    int32_t priority = 0) {
  SequenceRequest r;
  r.id = id;
  r.prompt.resize(size_t(prompt_len));
  for (int32_t i = 0; i < prompt_len; ++i) r.prompt[size_t(i)] = 1 + TokenId((id * 31 + i) % 997);
  r.max_new_tokens = max_new_tokens;
  r.priority = priority;
  return r;
}

}  // namespace drift::testing
