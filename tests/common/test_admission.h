// Tests that run the scheduler without an engine issue its admitted requests themselves
// (scheduler/admitted_request.h): what they issue must be what the engine's judge would admit,
// or the scheduler's assertions and check_invariants() fail on it.
#pragma once

#include <utility>

#include "scheduler/admitted_request.h"

namespace drift::testing {

class TestAdmission : AdmittedRequest::Issuer {
 public:
  static AdmittedRequest admit(SequenceRequest request) { return issue(std::move(request)); }
};

inline AdmittedRequest admitted(SequenceRequest request) {
  return TestAdmission::admit(std::move(request));
}

}  // namespace drift::testing
