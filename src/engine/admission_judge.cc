#include "engine/admission_judge.h"

#include <algorithm>
#include <cassert>
#include <limits>

#include "engine/output_processor.h"
#include "scheduler/capacity_scheduler.h"

namespace drift {

std::optional<Rejection> AdmissionJudge::judge_fields(const Request& request, RequestId id,
                                                      std::optional<Fields>& fields) const {
  // Rule: everything decidable from the request's fields and the configuration is decided here,
  // at once, before any tokenizing.
  if (request.id && *request.id >= kFirstEngineAssignedId)
    return make_rejection(RejectReason::kInvalidRequest,
                          "request id {} is reserved: ids from 2^63 up are assigned by the engine",
                          id);
  if (request.priority != 0 && setup_.scheduler.policy != SchedulerPolicy::kPriority)
    // The value is not echoed: front ends may flip its sign (vLLM's "lower is served earlier").
    return make_rejection(RejectReason::kPriorityNotScheduled,
                          "a request priority needs the priority scheduling policy (--policy "
                          "priority); this engine runs {}",
                          scheduler_policy_name(setup_.scheduler.policy));
  if (request.kv_keep && !(*request.kv_keep > 0.0 && *request.kv_keep <= 1.0))
    return make_rejection(RejectReason::kInvalidRequest, "kv_keep must be in (0, 1], got {}",
                          *request.kv_keep);
  if (std::optional<Rejection> refused = check_embedding_request(request)) return refused;
  if (std::optional<Rejection> refused = check_output_request(request)) return refused;
  Fields judged;
  judged.sampling_ = setup_.sampling.resolve(request.sampling);
  if (Status s = judged.sampling_.validate(); !s.ok())
    return make_rejection(RejectReason::kInvalidRequest, "sampling: {}", s.message());
  for (const LogitBias& b : judged.sampling_.logit_bias)
    if (b.token >= vocab_size_)
      return make_rejection(RejectReason::kInvalidLogitBias,
                            "logit_bias token {} is outside the vocabulary of {}", b.token,
                            vocab_size_);
  judged.id_ = id;
  judged.priority_ = request.priority;
  judged.pooling_ = request.pooling;
  // An embedding keeps its whole prompt: its pooled vector reads every position's final state.
  judged.kv_keep_ = request.pooling != PoolingMode::kNone
                        ? 1.0
                        : request.kv_keep.value_or(setup_.scheduler.kv_compress.keep);
  judged.max_tokens_ = request.max_tokens;
  fields = std::move(judged);
  return std::nullopt;
}

std::optional<Rejection> AdmissionJudge::check_embedding_request(const Request& request) const {
  // Rule: an embedding request generates nothing, so nothing that shapes a generation applies.
  if (request.pooling == PoolingMode::kNone) return std::nullopt;
  if (setup_.embedding_size < 1)
    return make_rejection(RejectReason::kInvalidRequest, "this engine's model makes no embeddings");
  if (request.max_tokens)
    return make_rejection(RejectReason::kInvalidRequest,
                          "an embedding request generates no tokens, so it takes no "
                          "max_tokens");
  if (request.session_id)
    return make_rejection(RejectReason::kInvalidRequest,
                          "an embedding request cannot be a session turn");
  return std::nullopt;
}

std::optional<Rejection> AdmissionJudge::check_output_request(const Request& request) const {
  // Rule: what shapes the reply (stop strings, its format) is checked before any tokenizing.
  // (Its messages carry no request id: they go to clients as they are.)
  if (Status s = validate_stop_strings(request.stop); !s.ok())
    return Rejection{RejectReason::kInvalidStop, s.message(), std::nullopt};
  if (request.reply_format == ReplyFormat::kHarmony && !harmony_replies_)
    return Rejection{RejectReason::kInvalidRequest,
                     "reply_format: this model's replies are not in the harmony format",
                     std::nullopt};
  return std::nullopt;
}

std::optional<Rejection> AdmissionJudge::judge_size(const Fields& fields,
                                                    std::span<const TokenId> prompt,
                                                    std::optional<Size>& size) const {
  const int64_t prompt_len = int64_t(prompt.size());
  if (prompt_len == 0) return make_rejection(RejectReason::kEmptyPrompt, "the prompt is empty");
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= vocab_size_)
      return make_rejection(RejectReason::kTokenOutsideVocabulary,
                            "prompt token {} at position {} is outside the vocabulary of {}",
                            prompt[i], i, vocab_size_);
  }
  Size judged;
  judged.prompt_len_ = prompt.size();
  if (fields.pooling_ != PoolingMode::kNone) {
    // Nothing is generated: the prompt may fill the context, and only it needs pages.
    if (prompt_len > setup_.max_model_len)
      return make_rejection(RejectReason::kPromptTooLong,
                            "the input has {} tokens, but max_model_len is {}", prompt_len,
                            setup_.max_model_len);
    const int64_t pages = kv_pages_to_hold(prompt_len, 0);
    if (pages > setup_.num_kv_pages)
      return make_rejection(RejectReason::kExceedsKvCache,
                            "the request can never fit in the KV cache: {} input tokens need {} "
                            "pages of {} tokens, but the cache has {} pages",
                            prompt_len, pages, setup_.kv_layout.page_size, setup_.num_kv_pages);
  } else if (std::optional<Rejection> refused =
                 size_generation(fields, prompt_len, judged.max_new_tokens_)) {
    return refused;
  }
  size = judged;
  return std::nullopt;
}

std::optional<Rejection> AdmissionJudge::size_generation(const Fields& fields, int64_t prompt_len,
                                                         int32_t& max_new_tokens) const {
  const int64_t max_len = setup_.max_model_len;
  const int64_t kv_tokens = setup_.kv_tokens;
  if (prompt_len >= max_len)
    return make_rejection(RejectReason::kPromptTooLong,
                          "the prompt has {} tokens, but max_model_len is {}: no room to generate",
                          prompt_len, max_len);
  if (const std::optional<int32_t>& max_tokens = fields.max_tokens_) {
    if (*max_tokens < 1)
      return make_rejection(RejectReason::kInvalidRequest, "max_tokens must be >= 1, got {}",
                            *max_tokens);
    if (prompt_len + *max_tokens > max_len)
      return make_rejection(RejectReason::kMaxTokensTooLong,
                            "{} prompt tokens + {} max_tokens = {} exceed max_model_len {}",
                            prompt_len, *max_tokens, prompt_len + *max_tokens, max_len);
    max_new_tokens = *max_tokens;
  } else {
    // The default never makes a request too long: it shrinks to what is left.
    const int64_t room = std::min(max_len, kv_tokens) - prompt_len;
    const int64_t cap = setup_.default_max_tokens.value_or(std::numeric_limits<int32_t>::max());
    max_new_tokens = int32_t(std::clamp<int64_t>(room, 1, cap));
  }
  // kv_keep < 1 bounds what a long sequence holds: judged as the scheduler will admit it.
  const int64_t pages = kv_pages_to_hold(prompt_len, max_new_tokens, fields.kv_keep_);
  if (pages > setup_.num_kv_pages)
    return make_rejection(
        RejectReason::kExceedsKvCache,
        "the request can never fit in the KV cache: {} prompt + {} max new tokens need {} pages of "
        "{} tokens, but the cache has {} pages ({} tokens)",
        prompt_len, max_new_tokens, pages, setup_.kv_layout.page_size, setup_.num_kv_pages,
        kv_tokens);
  return std::nullopt;
}

AdmittedRequest AdmissionJudge::admit(Fields fields, const Size& size, std::vector<TokenId> prompt,
                                      std::shared_ptr<TokenConstraint> constraint) const {
  assert(prompt.size() == size.prompt_len_ && "admitted with the prompt that was judged");
  SequenceRequest seq;
  seq.id = fields.id_;
  seq.prompt = std::move(prompt);
  seq.max_new_tokens = size.max_new_tokens_;
  seq.priority = fields.priority_;
  seq.sampling = std::move(fields.sampling_);
  seq.constraint = std::move(constraint);
  seq.kv_keep = fields.kv_keep_;
  if (fields.pooling_ != PoolingMode::kNone) {
    seq.pooling = fields.pooling_;
    seq.embedding.resize(size_t(setup_.embedding_size));  // here, so that no step allocates it
  }
  return issue(std::move(seq));
}

int64_t AdmissionJudge::kv_pages_to_hold(int64_t prompt_len, int64_t max_new_tokens,
                                         double kv_keep) const {
  return estimate_kv_usage(setup_.kv_layout, setup_.scheduler.kv_compress,
                           setup_.scheduler.max_step_tokens(), prompt_len, max_new_tokens, kv_keep)
      .num_pages;
}

}  // namespace drift
