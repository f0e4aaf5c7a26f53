#include "server/rejection_error.h"

#include <algorithm>
#include <cmath>

namespace drift::server {

ApiError error_for_rejection(const Finish& finish, std::string_view prompt_param,
                             std::string_view grammar_param) {
  const std::string& message = finish.message;
  // A rejection without a kind would be an engine bug; it stays a client error, as before kinds.
  switch (finish.reject_reason.value_or(RejectReason::kInvalidRequest)) {
    case RejectReason::kOverloaded: {
      ApiError e = overloaded(message);
      if (finish.retry_after_seconds)
        e.retry_after_seconds = std::max(1, int(std::ceil(*finish.retry_after_seconds)));
      return e;
    }
    case RejectReason::kShuttingDown:
    case RejectReason::kUnhealthy:
      return unavailable(message);
    case RejectReason::kEmptyPrompt:
    case RejectReason::kTokenOutsideVocabulary:
    case RejectReason::kPromptTooLong:
    case RejectReason::kInvalidPrompt:
      return bad_request(message, prompt_param);
    case RejectReason::kInvalidGrammar:
      return bad_request(message, grammar_param);
    case RejectReason::kInvalidLogitBias:
      return bad_request(message, "logit_bias");
    case RejectReason::kMaxTokensTooLong:
      return bad_request(message, "max_tokens");
    case RejectReason::kSessionBusy: {
      // A second turn while one runs conflicts with the session's state.
      ApiError e = bad_request(message, "session_id");
      e.status = 409;
      e.code = "session_busy";
      return e;
    }
    case RejectReason::kSessionLimit: {
      // A cap is the server's capacity: a retry after another session ends succeeds.
      ApiError e = overloaded(message);
      e.code = "session_limit";
      return e;
    }
    case RejectReason::kExceedsKvCache:
    case RejectReason::kInvalidRequest:
      return bad_request(message);
  }
  return bad_request(message);
}

}  // namespace drift::server
