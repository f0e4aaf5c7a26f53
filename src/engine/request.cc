#include "engine/request.h"

#include "jinja/error_kind.h"

namespace drift {

RejectReason reject_reason_for_prompt(const Error& error) {
  using jinja::ErrorKind;
  if (error.code == ErrorKind::kRaised) return RejectReason::kChatTemplateRefused;
  // A template that does not parse, or fails on a conversation it accepted: its author's bug.
  if (error.code == ErrorKind::kRuntime || error.code == ErrorKind::kSyntax)
    return RejectReason::kChatTemplateFailed;
  // kLimit: the conversation outgrew the sandbox (a client can always make it do so);
  // kInvalidVariables and no kind: the request is not something a template can take.
  return RejectReason::kInvalidPrompt;
}

Expected<std::vector<Request>> fan_out_choices(const Request& request, int32_t n) {
  if (n < 1 || n > kMaxChoices) return make_error("n: must be in [1, {}], got {}", kMaxChoices, n);
  if (n > 1 && request.id) return make_error("n: {} choices cannot share one request id", n);
  if (n > 1 && request.session_id)
    return make_error("n: a session turn has one choice (a session takes one turn at a time)");
  std::vector<Request> choices(size_t(n), request);
  if (request.sampling.seed)
    for (int32_t i = 1; i < n; ++i)
      choices[size_t(i)].sampling.seed = *request.sampling.seed + uint64_t(i);
  return choices;
}

std::string_view reject_reason_name(RejectReason reason) {
  switch (reason) {
    case RejectReason::kInvalidRequest:
      return "invalid_request";
    case RejectReason::kPriorityNotScheduled:
      return "priority_not_scheduled";
    case RejectReason::kInvalidPrompt:
      return "invalid_prompt";
    case RejectReason::kChatTemplateRefused:
      return "chat_template_refused";
    case RejectReason::kChatTemplateFailed:
      return "chat_template_failed";
    case RejectReason::kInvalidGrammar:
      return "invalid_grammar";
    case RejectReason::kInvalidLogitBias:
      return "invalid_logit_bias";
    case RejectReason::kInvalidStop:
      return "invalid_stop";
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
