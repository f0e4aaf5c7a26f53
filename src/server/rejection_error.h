// The one place where an engine refusal (RejectReason, engine/request.h) becomes an HTTP error.
// The kind decides the status, never the message's words:
//   kOverloaded                                  -> 429 + Retry-After (the engine's retry time,
//                                                   rounded up, at least 1 s)
//   kShuttingDown, kUnhealthy                    -> 503 + Retry-After: 1
//   kEmptyPrompt, kTokenOutsideVocabulary,
//   kPromptTooLong, kInvalidPrompt,
//   kChatTemplateRefused                         -> 400 naming the prompt ("prompt" or "messages")
//   kChatTemplateFailed                          -> 500 "chat_template_error": the server's
//                                                   template is broken, not the request
//   kMaxTokensTooLong                            -> 400 naming "max_tokens"
//   kInvalidGrammar                              -> 400 naming the grammar's field
//   kInvalidLogitBias                            -> 400 naming "logit_bias"
//   kInvalidStop                                 -> 400 naming the stop strings' field
//   kPriorityNotScheduled                        -> 400 naming "priority"
//   kSessionBusy                                 -> 409 "session_busy" (a turn is running)
//   kSessionLimit                                -> 429 "session_limit" + Retry-After: 1
//   kExceedsKvCache, kInvalidRequest             -> 400
// 429 rather than 503 for an overload: the server is healthy and a retry soon will likely
// succeed, and OpenAI clients retry 429 with backoff.
#pragma once

#include <string_view>

#include "engine/request.h"
#include "server/api_error.h"

namespace drift::server {

// The body fields a refusal names, as the request's API calls them.
struct RequestFields {
  std::string_view prompt = "prompt";            // "prompt", "messages", "input", ...
  std::string_view grammar = "response_format";  // response_format, guided_json, ...
  std::string_view stop = "stop";                // stop, stop_sequences, options.stop
};

// `finish` has reason kRejected.
ApiError error_for_rejection(const Finish& finish, const RequestFields& fields = {});

// A prompt the engine could not encode (Engine::tokenize), refused as a submit would refuse it
// (reject_reason_for_prompt).
ApiError error_for_prompt(const Error& error, std::string_view prompt_param = "prompt");

}  // namespace drift::server
