// The engine's one judge of a request: whether it can ever run, decided once, on the submitting
// thread, with a refusal (Rejection: its kind and a message that gives the sizes) a user can act
// on. Engine::accept asks it in three steps, around what only the engine can do (compile the
// grammar, tokenize, begin a session's turn):
//
//   judge_fields  the request's own fields: its id, priority, kv_keep, what an embedding may not
//                 ask for, stop strings and reply format, sampling over the engine's defaults;
//   judge_size    its prompt: tokens in the vocabulary, the context, max_tokens (or the default,
//                 which shrinks to what is left) and whether it can ever fit in the KV cache, by
//                 the capacity scheduler's own estimate (kv_keep included);
//   admit         the AdmittedRequest (scheduler/admitted_request.h) built from those verdicts,
//                 the only kind of request EngineScheduler::add takes.
//
// Each verdict is a value only its step makes, and admit takes nothing else, so a request
// reaches the scheduler only as the judge admitted it, and the scheduler never judges again.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/engine_config.h"
#include "engine/gateway.h"
#include "engine/request.h"
#include "scheduler/admitted_request.h"

namespace drift {

class AdmissionJudge : AdmittedRequest::Issuer {
 public:
  // What judge_fields found: everything the sequence takes from the request's fields.
  class Fields {
   public:
    PoolingMode pooling() const { return pooling_; }

   private:
    friend class AdmissionJudge;
    Fields() = default;
    RequestId id_ = 0;
    int32_t priority_ = 0;
    PoolingMode pooling_ = PoolingMode::kNone;
    double kv_keep_ = 1.0;  // resolved: the request's, else the configured default
    std::optional<int32_t> max_tokens_;
    SamplingParams sampling_;  // the request's over the engine's defaults, validated
  };
  // What judge_size found for one prompt: the new tokens it may generate.
  class Size {
   public:
    int32_t max_new_tokens() const { return max_new_tokens_; }

   private:
    friend class AdmissionJudge;
    Size() = default;
    size_t prompt_len_ = 0;
    int32_t max_new_tokens_ = 0;
  };

  // `harmony_replies`: the model's tokenizer has harmony's markers (ReplyFormat::kHarmony).
  AdmissionJudge(const EngineSetup& setup, int32_t vocab_size, bool harmony_replies)
      : setup_(setup), vocab_size_(vocab_size), harmony_replies_(harmony_replies) {}

  // Why `request` (to run as `id`) cannot run by its own fields, before anything is tokenized;
  // nullopt, with `fields` set, when it may.
  std::optional<Rejection> judge_fields(const Request& request, RequestId id,
                                        std::optional<Fields>& fields) const;
  // Why a request with these fields cannot run with `prompt` (for a session turn, the whole
  // prompt: history and input); nullopt, with `size` set, when it can.
  std::optional<Rejection> judge_size(const Fields& fields, std::span<const TokenId> prompt,
                                      std::optional<Size>& size) const;
  // The request admitted with `prompt`, the one `size` was judged with (same tokens), and its
  // compiled grammar (null: free output).
  AdmittedRequest admit(Fields fields, const Size& size, std::vector<TokenId> prompt,
                        std::shared_ptr<TokenConstraint> constraint) const;

  // The most KV pages a sequence of this size holds at once: the capacity scheduler's own
  // estimate (scheduler/capacity_scheduler.h), so that what the judge admits the scheduler can
  // run, and what it refuses the scheduler could never run.
  int64_t kv_pages_to_hold(int64_t prompt_len, int64_t max_new_tokens, double kv_keep = 1.0) const;

 private:
  // Why an embedding request (Request::pooling) cannot run, from its fields alone; nullopt for
  // one that can, and for a generation request.
  std::optional<Rejection> check_embedding_request(const Request& request) const;
  // Why the request's stop strings or reply format cannot be used; nullopt when they can.
  std::optional<Rejection> check_output_request(const Request& request) const;
  // The max_new_tokens of a generation with a prompt of `prompt_len` tokens, or why it has none.
  std::optional<Rejection> size_generation(const Fields& fields, int64_t prompt_len,
                                           int32_t& max_new_tokens) const;

  const EngineSetup& setup_;  // the engine's, which outlives its judge
  const int32_t vocab_size_;
  const bool harmony_replies_;
};

}  // namespace drift
