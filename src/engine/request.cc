#include "engine/request.h"

namespace drift {

std::string_view reject_reason_name(RejectReason reason) {
  switch (reason) {
    case RejectReason::kInvalidRequest:
      return "invalid_request";
    case RejectReason::kInvalidPrompt:
      return "invalid_prompt";
    case RejectReason::kInvalidGrammar:
      return "invalid_grammar";
    case RejectReason::kInvalidLogitBias:
      return "invalid_logit_bias";
    case RejectReason::kEmptyPrompt:
      return "empty_prompt";
    case RejectReason::kTokenOutsideVocabulary:
      return "token_outside_vocabulary";
    case RejectReason::kPromptTooLong:
      return "prompt_too_long";
    case RejectReason::kMaxTokensTooLong:
      return "max_tokens_too_long";
    case RejectReason::kExceedsKvCache:
      return "exceeds_kv_cache";
    case RejectReason::kSessionBusy:
      return "session_busy";
    case RejectReason::kSessionLimit:
      return "session_limit";
    case RejectReason::kOverloaded:
      return "overloaded";
    case RejectReason::kShuttingDown:
      return "shutting_down";
    case RejectReason::kUnhealthy:
      return "unhealthy";
  }
  return "unknown";
}

}  // namespace drift
