#include "server/rejection_error.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

namespace drift::server {

namespace {

ApiError error_for(RejectReason reason, const std::string& message,
                   std::optional<double> retry_after_seconds, const RequestFields& fields) {
  switch (reason) {
    case RejectReason::kOverloaded: {
      ApiError e = overloaded(message);
      if (retry_after_seconds)
        e.retry_after_seconds = std::max(1, int(std::ceil(*retry_after_seconds)));
      return e;
    }
    case RejectReason::kShuttingDown:
    case RejectReason::kUnhealthy:
      return unavailable(message);
    case RejectReason::kEmptyPrompt:
    case RejectReason::kTokenOutsideVocabulary:
    case RejectReason::kPromptTooLong:
    case RejectReason::kInvalidPrompt:
    case RejectReason::kChatTemplateRefused:
      return bad_request(message, fields.prompt);
    case RejectReason::kChatTemplateFailed: {
      // The operator's template (the GGUF's or --chat-template) failed on a conversation it
      // should render: a server error, which a client cannot fix by changing the request.
      ApiError e = internal_error(
          "the server's chat template failed to render this conversation (a fault of the "
          "template the server runs, not of the request): " +
          message);
      e.code = "chat_template_error";
      return e;
    }
    case RejectReason::kInvalidGrammar:
      return bad_request(message, fields.grammar);
    case RejectReason::kInvalidLogitBias:
      return bad_request(message, "logit_bias");
    case RejectReason::kInvalidStop:
      return bad_request(message, fields.stop);
    case RejectReason::kPriorityNotScheduled:
      return bad_request(message, "priority");
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

}  // namespace

ApiError error_for_rejection(const Finish& finish, const RequestFields& fields) {
  // A rejection without a kind would be an engine bug; it stays a client error, as before kinds.
  return error_for(finish.reject_reason.value_or(RejectReason::kInvalidRequest), finish.message,
                   finish.retry_after_seconds, fields);
}

ApiError error_for_prompt(const Error& error, std::string_view prompt_param) {
  return error_for(reject_reason_for_prompt(error), error.message, std::nullopt,
                   {.prompt = prompt_param});
}

}  // namespace drift::server
