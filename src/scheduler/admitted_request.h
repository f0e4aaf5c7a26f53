// The one kind of request the scheduler takes: one that has been judged able to run.
//
// Whether a request can ever run is decided once, by the engine's judge
// (engine/admission_judge.h), with a refusal a user can act on. What it admits is an
// AdmittedRequest, which nothing else in src/ can make, so EngineScheduler::add never refuses:
// it asserts what an admitted request promises, and check_invariants() checks it of every
// sequence. The promise, against the scheduler's configuration and KV pool:
//   - a new id (the engine's worker refuses an id in use before it adds);
//   - a prompt of at least one token, none negative;
//   - max_new_tokens >= 1, or, for an embedding (pooling set), 0 and room for its vector;
//   - prompt + max_new_tokens within max_model_len;
//   - valid sampling parameters (SamplingParams::validate) and kv_keep in (0, 1];
//   - a worst case (CapacityScheduler::estimate, kv_keep included) that fits in the KV pool.
#pragma once

#include <utility>

#include "scheduler/sequence_state.h"

namespace drift {

class EngineScheduler;

class AdmittedRequest {
 public:
  // The issuers of admitted requests derive from it: the engine's judge, and the drivers of the
  // scheduler's own tests, which run it without an engine (and so must issue only what the judge
  // would admit: the scheduler's checks fail on anything else).
  class Issuer {
   protected:
    static AdmittedRequest issue(SequenceRequest request) {
      return AdmittedRequest(std::move(request));
    }
  };

  const SequenceRequest& request() const { return request_; }

 private:
  friend class EngineScheduler;  // add() takes the request apart
  explicit AdmittedRequest(SequenceRequest request) : request_(std::move(request)) {}

  SequenceRequest request_;
};

}  // namespace drift
