#include "executor/cpu_executor.h"

#include <algorithm>
#include <exception>

#include "executor/pooling.h"
#include "sampling/logprobs.h"

namespace drift {

Expected<std::unique_ptr<CpuExecutor>> CpuExecutor::create(const Model& model,
                                                           const CpuExecutorConfig& config) {
  DRIFT_ASSIGN_OR_RETURN(KvPages kv,
                         KvPages::create(model.config(), config.num_pages, config.page_size,
                                         config.kv_format, config.kv_placement));
  ForwardLimits limits;
  limits.max_tokens = config.max_batch_tokens;
  limits.max_sequences = config.max_batch_sequences;
  limits.max_context = config.max_context;
  limits.threads = config.threads;
  DRIFT_ASSIGN_OR_RETURN(std::unique_ptr<ForwardPass> forward, ForwardPass::create(model, limits));
  return std::unique_ptr<CpuExecutor>(
      new CpuExecutor(model, config, std::move(kv), std::move(forward)));
}

CpuExecutor::CpuExecutor(const Model& model, const CpuExecutorConfig& config, KvPages kv,
                         std::unique_ptr<ForwardPass> forward)
    : model_(model),
      config_(config),
      pool_(config.threads),
      kv_(std::move(kv)),
      forward_(std::move(forward)),
      sequences_(config.max_batch_sequences),
      logits_(static_cast<size_t>(config.max_batch_sequences + config.max_draft_tokens) *
              model.config().n_vocab),
      logit_row_item_(config.max_batch_sequences),
      logit_first_row_(config.max_batch_sequences),
      hidden_(static_cast<size_t>(config.max_batch_tokens) * model.config().n_embd),
      compressor_(config.kv_compress) {
  for (int t = 0; t < pool_.size(); ++t) {
    sampler_scratch_.emplace_back(model.config().n_vocab, model.isa());
    logprob_rows_.emplace_back(model.config().n_vocab);
    mask_rows_.emplace_back(size_t(token_mask_words(model.config().n_vocab)));
    if (config.max_draft_tokens > 0) draft_histories_.emplace_back(size_t(config.max_context));
  }
}

Status CpuExecutor::run(const StepPlan& plan, ExecutionResult& result) {
  // Nothing below throws by design; an exception means a bug or exhausted memory, after which the
  // executor's state cannot be trusted: report it and stop taking steps.
  try {
    return run_step(plan, result);
  } catch (const std::exception& e) {
    healthy_ = false;
    return make_error("executor failed: {}", e.what());
  }
}

Status CpuExecutor::run_step(const StepPlan& plan, ExecutionResult& result) {
  if (static_cast<int64_t>(plan.items.size()) > config_.max_batch_sequences)
    return make_error("step has {} items, the executor was sized for {}", plan.items.size(),
                      config_.max_batch_sequences);
  if (plan.page_size != kv_.page_size())
    return make_error("step uses page size {}, the KV cache has {}", plan.page_size,
                      kv_.page_size());
  if (plan.kv_groups != kv_.num_groups())
    return make_error("step has page lists of {} KV groups, the KV cache has {}", plan.kv_groups,
                      kv_.num_groups());
  for (const PageCopy& copy : plan.page_copies) {
    if (copy.src < 0 || copy.src >= kv_.num_pages() || copy.dst < 0 || copy.dst >= kv_.num_pages())
      return make_error("page copy {} -> {} is outside the KV cache", copy.src, copy.dst);
    kv_.copy_page(copy.src, copy.dst);
  }

  for (SeqId id : plan.kv_tables_released) kv_tables_.erase(id);
  DRIFT_RETURN_IF_ERROR(validate_drafts(plan));

  const size_t n_items = plan.items.size();
  for (size_t i = 0; i < n_items; ++i) {
    const StepItem& item = plan.items[i];
    ForwardSequence& s = sequences_[i];
    s.heads = nullptr;
    s.metric_tokens = 0;
    if (item.kv_compressed) {
      DRIFT_ASSIGN_OR_RETURN(s.heads, kv_table_for(item));
      // A decode token adds to the metric at every step (a compression clears it, so the sums
      // cover the queries since the last one); a prefill chunk's last metric_window tokens do.
      s.metric_tokens = std::min<int64_t>(config_.kv_compress.metric_window, item.num_tokens);
    } else if (item.kv_slots != item.start_position) {
      return make_error(
          "item of sequence {} is not compressed but starts at slot {} of position {}", item.seq_id,
          item.kv_slots, item.start_position);
    }
    s.token_begin = item.token_offset;
    s.n_tokens = item.num_tokens;
    s.start_pos = item.start_position;
    s.page_table = plan.pages(item);
    s.want_logits = item.sample;
    s.all_logits = item.num_drafts > 0;  // a row for each verified position
    const PooledRows rows =
        pooled_rows(item.pooling, item.start_position, item.num_tokens, item.completes_embedding());
    s.hidden_begin = rows.begin;
    s.n_hidden = rows.count;
  }
  ForwardBatch batch{plan.token_ids, std::span<const ForwardSequence>(sequences_.data(), n_items)};
  DRIFT_RETURN_IF_ERROR(forward_->run(batch, kv_, pool_, logits_, hidden_));
  DRIFT_RETURN_IF_ERROR(compress_kv(plan));

  result.reset(n_items);
  // Sized once, at the first step (the executor's warm-up): no later step allocates it.
  if (result.draft_logprobs.size() < size_t(config_.max_draft_tokens))
    result.draft_logprobs.resize(size_t(config_.max_draft_tokens));
  pool_embeddings(plan, result);
  // Logits rows are in item order, one per sampled item and one more per draft.
  int64_t n_sampled = 0, n_rows = 0;
  for (size_t i = 0; i < n_items; ++i) {
    if (!plan.items[i].sample) continue;
    logit_row_item_[n_sampled] = static_cast<int64_t>(i);
    logit_first_row_[n_sampled++] = n_rows;
    n_rows += 1 + plan.items[i].num_drafts;
  }
  // Each sampled row is independent (the grammar mask, filters and draw touch only its own
  // sequence's matcher, its logits and the thread's scratch), so the rows are spread over the
  // pool: with a 49k-262k vocabulary, sampling 64 sequences one after another would be a serial
  // tail on every decode step, and a constrained row's mask costs about as much as its draw.
  pool_.run([&](int index, int count) {
    const Range rows = split_range(n_sampled, index, count);
    for (int64_t k = rows.begin; k < rows.end; ++k) sample_item(plan, k, index, result);
  });
  return Status::Ok();
}

Expected<KvHeadTable*> CpuExecutor::kv_table_for(const StepItem& item) {
  auto it = kv_tables_.find(item.seq_id);
  if (it == kv_tables_.end()) {
    // The sequence's first item: its slots so far (a prefix-cache hit) hold their positions.
    if (item.kv_slots != item.start_position)
      return make_error("no KV head table for sequence {}, which holds {} slots of {} positions",
                        item.seq_id, item.kv_slots, item.start_position);
    const ModelConfig& c = model_.config();
    auto table = std::make_unique<KvHeadTable>(c.n_layers, c.n_kv_heads, config_.max_context,
                                               config_.kv_compress.metric_intervals);
    if (!table->append(0, item.kv_slots))
      return make_error("sequence {} starts past the context of {}", item.seq_id,
                        config_.max_context);
    it = kv_tables_.emplace(item.seq_id, std::move(table)).first;
  }
  if (it->second->max_length() != item.kv_slots)
    return make_error("KV head table of sequence {} holds {} entries, the plan says {}",
                      item.seq_id, it->second->max_length(), item.kv_slots);
  return it->second.get();
}

// Rule: each planned compression leaves every head of its sequence with exactly num_slots
// entries (those below keep_from untouched), so that the scheduler may free the pages past them.
Status CpuExecutor::compress_kv(const StepPlan& plan) {
  for (const KvCompression& c : plan.kv_compressions) {
    if (c.item < 0 || c.item >= static_cast<int32_t>(plan.items.size()))
      return make_error("KV compression of item {} of a plan of {}", c.item, plan.items.size());
    KvHeadTable* heads = sequences_[size_t(c.item)].heads;
    if (heads == nullptr)
      return make_error("KV compression of item {}, which is not compressed", c.item);
    if (c.num_slots < c.keep_from || c.num_slots > heads->max_length())
      return make_error("KV compression of item {} to {} of its {} slots (from {})", c.item,
                        c.num_slots, heads->max_length(), c.keep_from);
    const int64_t slots = compressor_.compress_to(c.positions, c.num_slots, c.keep_from, *heads,
                                                  kv_, plan.pages(plan.items[size_t(c.item)]));
    if (slots != c.num_slots)
      return make_error("KV compression of item {} kept {} slots, {} planned", c.item, slots,
                        c.num_slots);
  }
  return Status::Ok();
}

void CpuExecutor::pool_embeddings(const StepPlan& plan, ExecutionResult& result) {
  // Rule: hidden rows are in item order, as many per item as pooled_rows asked for.
  const int64_t dim = model_.config().n_embd;
  int64_t row = 0;
  for (size_t i = 0; i < plan.items.size(); ++i) {
    const StepItem& item = plan.items[i];
    const int64_t n_rows = sequences_[i].n_hidden;
    if (item.pooling == PoolingMode::kNone) continue;
    std::span<const float> rows(hidden_.data() + row * dim, size_t(n_rows * dim));
    row += n_rows;
    if (int64_t(item.embedding.size()) != dim) {
      result.items[i].error = make_error("embedding of sequence {} has {} floats, the model {}",
                                         item.seq_id, item.embedding.size(), dim);
      continue;
    }
    pool_chunk(item.pooling, item.start_position, rows, item.embedding);
    if (!item.completes_embedding()) continue;
    finish_embedding(item.pooling, item.prompt_len, item.embedding);
    result.items[i].embedded = true;
  }
}

// Rule: a draft is checked by sampling its position exactly as a decode of the tokens before it
// would — the same logits (a token's logits do not depend on its batch), penalties over the same
// history, the same random draw (indexed by the tokens generated before it) — and accepted when
// the sample equals it. So the output is token for token what decoding one at a time gives,
// greedy or sampled; for a sampled request that is standard speculative sampling with a point-mass
// draft: accepted with probability p(draft), else a sample of p without the draft, renormalised.
void CpuExecutor::sample_item(const StepPlan& plan, int64_t index, int thread,
                              ExecutionResult& result) {
  const int64_t i = logit_row_item_[index];
  const StepItem& item = plan.items[i];
  ItemResult& out = result.items[i];
  const std::span<const TokenId> drafts = plan.tokens(item).last(size_t(item.num_drafts));
  // This item's drafts' logprobs: after those of the drafts of the sampled items before it.
  TokenLogprobs* draft_logprobs = result.draft_logprobs.data() + (logit_first_row_[index] - index);
  // The item's result when verification ends at draft j, itself the sampled token: its grammar
  // completed there (decoding would sample nothing after it), or failed after it (decoding would
  // report that a step later, at that position).
  auto end_at_draft = [&](int32_t j) {
    out.error.reset();
    out.token = drafts[size_t(j)];
    out.accepted_drafts = j;
    out.logprobs.reset();
    if (item.sampling->logprobs) {
      out.logprobs = draft_logprobs[j];
      out.draft_logprobs = {draft_logprobs, size_t(j)};
    }
  };
  std::span<const int32_t> history = item.history;
  // Under a grammar, position j > 0 is masked by a copy of the sequence's matcher advanced over
  // drafts [0, j): the mask a decode after them would compute. The sequence's own matcher stays
  // where it was, and the scheduler advances it with the tokens it commits. A copy, not advancing
  // and taking back: llguidance's rollback over a special token (harmony's <|channel|>) does not
  // restore what consuming it changed.
  TokenConstraint* constraint = item.constraint;
  std::unique_ptr<TokenConstraint> verifier;
  for (int32_t j = 0;; ++j) {
    if (j > 0) {  // the history of position j: the item's tokens, then drafts [0, j)
      std::vector<int32_t>& buffer = draft_histories_[size_t(thread)];
      if (j == 1) std::copy(item.history.begin(), item.history.end(), buffer.begin());
      buffer[item.history.size() + size_t(j - 1)] = drafts[size_t(j - 1)];
      history = std::span<const int32_t>(buffer.data(), item.history.size() + size_t(j));
    }
    std::optional<TokenLogprobs> logprobs;
    const int32_t token = sample_position(item, logit_first_row_[index] + j, history, constraint,
                                          thread, out, logprobs);
    if (token < 0) {
      if (verifier) end_at_draft(j - 1);
      break;
    }
    if (j < item.num_drafts && token == drafts[size_t(j)]) {
      if (logprobs) draft_logprobs[j] = *logprobs;
      if (constraint) {
        if (!verifier) {
          verifier = item.constraint->clone();
          constraint = verifier.get();
        }
        if (!constraint->accept(token).ok()) {
          end_at_draft(j);  // the scheduler's accept reports it
          break;
        }
        if (constraint->complete()) {
          end_at_draft(j);
          break;
        }
      }
      continue;
    }
    out.token = token;
    out.accepted_drafts = j;
    out.logprobs = logprobs;
    if (logprobs) out.draft_logprobs = {draft_logprobs, size_t(j)};
    break;
  }
}

int32_t CpuExecutor::sample_position(const StepItem& item, int64_t row,
                                     std::span<const int32_t> history, TokenConstraint* constraint,
                                     int thread, ItemResult& result,
                                     std::optional<TokenLogprobs>& logprobs) {
  const int64_t n_vocab = model_.config().n_vocab;
  std::span<float> logits(logits_.data() + row * n_vocab, n_vocab);
  const SamplingParams& params = *item.sampling;
  const uint64_t seed = params.seed.value_or(item.seq_id);
  std::vector<float>& raw = logprob_rows_[thread];
  // Sampling rewrites the logits in place; logprobs are of the raw ones.
  if (params.logprobs) std::copy(logits.begin(), logits.end(), raw.begin());
  // The mask depends only on the tokens before the position: it is the same whatever the batch
  // (a draft's position sees the matcher advanced over the drafts before it: sample_item).
  std::span<const uint32_t> allowed;
  if (constraint) {
    std::span<uint32_t> mask(mask_rows_[thread]);
    if (Status s = constraint->fill_mask(mask); !s.ok()) {
      result.error = s.error();
      return -1;
    }
    allowed = mask;
  }
  const int32_t token = sample_token(logits, params, history, item.prompt_len, seed,
                                     sampler_scratch_[thread], allowed);
  if (params.logprobs && token >= 0 && token < n_vocab) {
    logprobs.emplace();
    compute_token_logprobs(raw, token, *params.logprobs, *logprobs);
  }
  return token;
}

Status CpuExecutor::validate_drafts(const StepPlan& plan) const {
  // Rule: drafts ride only in a sampled decode item of an uncompressed sequence,
  // whose history and drafts fit the context, and the plan's drafts fit the logits rows.
  int64_t drafts = 0;
  for (const StepItem& item : plan.items) {
    if (item.num_drafts == 0) continue;
    if (item.num_drafts < 0 || item.num_drafts >= item.num_tokens || !item.sample ||
        item.kind != StepItemKind::kDecode || item.kv_compressed ||
        int64_t(item.history.size()) + item.num_drafts > config_.max_context)
      return make_error("item of sequence {} cannot verify its {} drafts", item.seq_id,
                        item.num_drafts);
    drafts += item.num_drafts;
  }
  if (drafts > config_.max_draft_tokens)
    return make_error("step carries {} draft tokens, the executor was sized for {}", drafts,
                      config_.max_draft_tokens);
  return Status::Ok();
}

}  // namespace drift
