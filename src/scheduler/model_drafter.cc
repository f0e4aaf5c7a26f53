#include "scheduler/model_drafter.h"

#include <algorithm>

namespace drift {

ModelDrafter::ModelDrafter(Executor& executor, KVCacheManager& kv, const ModelDrafterConfig& config)
    : executor_(executor), kv_(kv), config_(config), slots_(size_t(config.max_sequences)) {
  // Size everything a pass touches once, so that drafting allocates nothing after warm-up.
  const size_t seqs = size_t(config.max_sequences);
  const size_t max_tokens = size_t(config.max_context + config.max_draft_tokens);
  for (Slot& slot : slots_) slot.tokens.reserve(max_tokens);
  plan_.items.reserve(seqs);
  plan_.token_ids.reserve(size_t(config.max_pass_tokens()));
  plan_.block_table.reserve(seqs * size_t(kv.layout().pages_for_tokens(int64_t(max_tokens))));
  plan_.page_copies.reserve(seqs);
  plan_.page_size = kv.page_size();
  plan_.kv_groups = 1;
  result_.items.reserve(seqs);
  item_slots_.reserve(seqs);
  greedy_.temperature = 0.0f;
}

ModelDrafter::Slot* ModelDrafter::slot_for(SeqId seq, bool open) {
  Slot* free = nullptr;
  for (Slot& slot : slots_) {
    if (slot.used && slot.seq_id == seq) return &slot;
    if (!slot.used && !free) free = &slot;
  }
  if (!open || !free) return nullptr;
  if (!kv_.open(seq, config_.max_context + config_.max_draft_tokens).ok()) return nullptr;
  free->used = true;
  free->seq_id = seq;
  free->tokens.clear();
  free->committed = 0;
  free->ask = -1;
  return free;
}

void ModelDrafter::release(SeqId seq) {
  Slot* slot = slot_for(seq, false);
  if (!slot) return;
  kv_.release(seq);
  slot->used = false;
  slot->tokens.clear();
  slot->committed = 0;
  slot->ask = -1;
}

int32_t ModelDrafter::cached_tokens(SeqId seq) const {
  for (const Slot& slot : slots_)
    if (slot.used && slot.seq_id == seq) return slot.committed;
  return 0;
}

bool ModelDrafter::prepare(Slot& slot, const DraftAsk& ask, int32_t& budget, int32_t& feed,
                           bool& samples) {
  // Rule: what the cache holds stays while it equals the sequence's tokens — its committed
  // tokens (never changed) and the drafts the target accepted since; the rest is rolled back.
  // The sequence's last token is always fed, for the logits the first draft token comes from.
  const auto n = int32_t(ask.tokens.size());
  int32_t valid = std::min(slot.committed, n);
  while (valid < int32_t(slot.tokens.size()) && valid < n &&
         slot.tokens[size_t(valid)] == ask.tokens[size_t(valid)])
    ++valid;
  if (valid == n) --valid;
  if (kv_.num_tokens(slot.seq_id) > valid &&
      !kv_.compress(slot.seq_id, valid, valid, /*keep_promise=*/false).ok()) {
    release(slot.seq_id);
    return false;
  }
  slot.tokens.resize(size_t(valid));
  slot.committed = valid;
  // Rule: a decoding sequence lacks at most its last step's accepted drafts and sampled token,
  // always fed; a longer catch-up (a new or preempted sequence) takes a chunk of what is left of
  // the step's catch_up_tokens and drafts once it has caught up.
  const int32_t lacking = n - valid;
  if (lacking <= config_.max_draft_tokens + 1) {
    feed = lacking;
    samples = true;
    return true;
  }
  feed = std::min(lacking, budget);
  budget -= feed;
  samples = feed == lacking;
  return feed > 0;
}

bool ModelDrafter::add_item(Slot& slot, int32_t num_tokens, std::span<const TokenId> history) {
  if (!kv_.append(slot.seq_id, num_tokens, &plan_.page_copies)) return false;
  const auto end = int32_t(slot.tokens.size());
  std::span<const PageId> pages = kv_.pages(slot.seq_id, 0);
  StepItem item;
  item.seq_id = slot.seq_id;
  item.kind = num_tokens == 1 ? StepItemKind::kDecode : StepItemKind::kPrefill;
  item.start_position = end - num_tokens;
  item.num_tokens = num_tokens;
  item.token_offset = plan_.num_tokens();
  item.page_offset = int32_t(plan_.block_table.size());
  item.num_pages = int32_t(pages.size());
  item.sample = end == int32_t(history.size());
  item.sampling = &greedy_;
  item.history = history;
  item.prompt_len = int32_t(history.size());
  item.kv_slots = item.start_position;
  plan_.block_table.insert(plan_.block_table.end(), pages.begin(), pages.end());
  plan_.token_ids.insert(plan_.token_ids.end(), slot.tokens.end() - num_tokens, slot.tokens.end());
  plan_.items.push_back(item);
  (num_tokens == 1 ? plan_.num_decode_tokens : plan_.num_prefill_tokens) += num_tokens;
  item_slots_.push_back(&slot);
  return true;
}

Status ModelDrafter::run_pass() {
  plan_.step = step_++;
  ++stats_.passes;
  Status s = executor_.run(plan_, result_);
  if (!s.ok() || result_.items.size() != plan_.items.size()) {
    // What the failed pass wrote is not trusted: its sequences start over.
    for (Slot* slot : item_slots_) release(slot->seq_id);
    return s.ok() ? make_error("draft executor returned {} results for {} items",
                               result_.items.size(), plan_.items.size())
                  : s;
  }
  return Status::Ok();
}

void ModelDrafter::propose(std::span<DraftAsk> asks) {
  // Pass 0: every asking sequence's lacking tokens (its catch-up), sampling the first draft token
  // where that completes it; then one pass per further draft token, over the sequences that
  // still want one. All greedy.
  plan_.clear();
  item_slots_.clear();
  int32_t budget = config_.catch_up_tokens;
  for (size_t i = 0; i < asks.size(); ++i) {
    DraftAsk& ask = asks[i];
    ask.proposed = 0;
    if (ask.out.empty() || ask.tokens.empty()) continue;
    Slot* slot = slot_for(ask.seq_id, /*open=*/true);
    int32_t feed = 0;
    bool samples = false;
    if (!slot) {
      ++stats_.no_room;
      continue;
    }
    if (!prepare(*slot, ask, budget, feed, samples)) continue;
    slot->tokens.insert(slot->tokens.end(), ask.tokens.begin() + slot->committed,
                        ask.tokens.begin() + slot->committed + feed);
    if (!add_item(*slot, feed, ask.tokens)) {
      slot->tokens.resize(size_t(slot->committed));
      ++stats_.no_room;
      continue;
    }
    slot->committed += feed;
    stats_.catch_up_tokens += uint64_t(feed);
    slot->ask = samples ? int32_t(i) : -1;
  }
  for (int32_t j = 0; !plan_.empty(); ++j) {
    if (!run_pass().ok()) break;
    for (size_t k = 0; k < plan_.items.size(); ++k) {
      Slot& slot = *item_slots_[k];
      if (slot.ask < 0) continue;
      const ItemResult& r = result_.items[k];
      DraftAsk& ask = asks[size_t(slot.ask)];
      if (r.error || !r.token) {
        ask.proposed = 0;
        release(slot.seq_id);
        continue;
      }
      ask.out[size_t(j)] = *r.token;
      ask.proposed = j + 1;
    }
    plan_.clear();
    item_slots_.clear();
    for (Slot& slot : slots_) {
      if (!slot.used || slot.ask < 0) continue;
      DraftAsk& ask = asks[size_t(slot.ask)];
      if (ask.proposed != j + 1 || ask.out.size() <= size_t(j + 1)) continue;
      slot.tokens.push_back(ask.out[size_t(j)]);  // fed as a draft: not committed
      if (!add_item(slot, 1, slot.tokens)) {
        slot.tokens.pop_back();
        ++stats_.no_room;
      }
    }
  }
  for (Slot& slot : slots_) slot.ask = -1;
  for (const DraftAsk& ask : asks) stats_.draft_tokens += uint64_t(ask.proposed);
}

}  // namespace drift
