// Engine refusals become HTTP errors by their kind, in one place: the status, the param at fault
// and Retry-After follow the RejectReason, never the words of the message.
#include "server/rejection_error.h"

#include <gtest/gtest.h>

#include "jinja/template.h"

namespace drift::server {
namespace {

// The error of a real template rendering one user message, as the chat template would fail.
Error template_error(const std::string& source) {
  auto compiled = jinja::Template::parse(source);
  if (!compiled.ok()) return compiled.error();
  auto rendered = compiled->render(jinja::Json{
      {"messages", jinja::Json::array({jinja::Json{{"role", "user"}, {"content", "hi"}}})}});
  return rendered.ok() ? Error{"rendered"} : rendered.error();
}

Finish rejected(RejectReason reason, std::string message = "why") {
  Finish f;
  f.reason = FinishReason::kRejected;
  f.reject_reason = reason;
  f.message = std::move(message);
  return f;
}

TEST(RejectionError, APredictedWaitBecomes429WithRetryAfterRoundedUp) {
  Finish f = rejected(RejectReason::kOverloaded,
                      "overloaded: predicted time to first token 7.30 s exceeds max_ttft 5.00 s");
  f.retry_after_seconds = 2.3;
  ApiError e = error_for_rejection(f);
  EXPECT_EQ(e.status, 429);
  EXPECT_EQ(e.code, "overloaded");
  EXPECT_EQ(e.message, f.message);
  EXPECT_EQ(e.retry_after_seconds, 3);
  f.retry_after_seconds = 0.01;  // never "retry now"
  EXPECT_EQ(error_for_rejection(f).retry_after_seconds, 1);
  f.retry_after_seconds.reset();  // a full queue without a prediction: retry in a second
  EXPECT_EQ(error_for_rejection(f).retry_after_seconds, 1);
}

TEST(RejectionError, AClosedEngineIs503WithRetryAfter) {
  for (RejectReason r : {RejectReason::kShuttingDown, RejectReason::kUnhealthy}) {
    ApiError e = error_for_rejection(rejected(r));
    EXPECT_EQ(e.status, 503) << reject_reason_name(r);
    EXPECT_EQ(e.retry_after_seconds, 1) << reject_reason_name(r);
  }
}

TEST(RejectionError, PromptRefusalsNameTheFieldThatHeldThePrompt) {
  for (RejectReason r : {RejectReason::kEmptyPrompt, RejectReason::kTokenOutsideVocabulary,
                         RejectReason::kPromptTooLong, RejectReason::kInvalidPrompt}) {
    EXPECT_EQ(error_for_rejection(rejected(r), {.prompt = "prompt"}).param, "prompt")
        << reject_reason_name(r);
    ApiError chat = error_for_rejection(rejected(r), {.prompt = "messages"});
    EXPECT_EQ(chat.status, 400) << reject_reason_name(r);
    EXPECT_EQ(chat.param, "messages") << reject_reason_name(r);
  }
}

TEST(RejectionError, ABusySessionIs409AndASessionCapIs429WithRetryAfter) {
  const ApiError busy = error_for_rejection(rejected(RejectReason::kSessionBusy));
  EXPECT_EQ(busy.status, 409);
  EXPECT_EQ(busy.code, "session_busy");
  EXPECT_EQ(busy.param, "session_id");
  const ApiError cap = error_for_rejection(rejected(RejectReason::kSessionLimit));
  EXPECT_EQ(cap.status, 429);
  EXPECT_EQ(cap.code, "session_limit");
  EXPECT_EQ(cap.retry_after_seconds, 1);
}

// The engine alone bounds stop strings; its refusal names the field of the request's API.
TEST(RejectionError, StopStringRefusalsNameTheFieldThatHeldThem) {
  const Finish f = rejected(RejectReason::kInvalidStop, "at most 16 stop strings may be given");
  EXPECT_EQ(error_for_rejection(f).param, "stop");
  const ApiError anthropic = error_for_rejection(f, {.stop = "stop_sequences"});
  EXPECT_EQ(anthropic.status, 400);
  EXPECT_EQ(anthropic.param, "stop_sequences");
  EXPECT_EQ(anthropic.message, "at most 16 stop strings may be given");
}

TEST(RejectionError, OtherRefusalsAre400NamingTheirField) {
  EXPECT_EQ(error_for_rejection(rejected(RejectReason::kMaxTokensTooLong)).param, "max_tokens");
  for (RejectReason r : {RejectReason::kExceedsKvCache, RejectReason::kInvalidRequest}) {
    ApiError e = error_for_rejection(rejected(r));
    EXPECT_EQ(e.status, 400) << reject_reason_name(r);
    EXPECT_FALSE(e.param) << reject_reason_name(r);
    EXPECT_FALSE(e.retry_after_seconds) << reject_reason_name(r);
  }
}

TEST(RejectionError, TheKindDecidesNotTheWords) {
  // A message that reads like another kind keeps its own kind's status.
  EXPECT_EQ(error_for_rejection(rejected(RejectReason::kInvalidRequest,
                                         "overloaded: the engine is shutting down, unhealthy"))
                .status,
            400);
  EXPECT_EQ(error_for_rejection(rejected(RejectReason::kOverloaded, "no keyword here")).status,
            429);
}

TEST(RejectionError, ABrokenServerTemplateIs500AndItsRefusalIs400WithItsMessage) {
  // A template the operator runs that breaks on a conversation: not the client's fault.
  const ApiError broken =
      error_for_prompt(template_error("{{ messages[0].content.no_such_method() }}"), "messages");
  EXPECT_EQ(broken.status, 500);
  EXPECT_EQ(broken.code, "chat_template_error");
  EXPECT_NE(broken.message.find("chat template"), std::string::npos) << broken.message;
  EXPECT_NE(broken.message.find("not of the request"), std::string::npos) << broken.message;
  EXPECT_EQ(error_for_prompt(template_error("{{ 1 // 0 }}")).status, 500);
  // The template's raise_exception refuses this conversation: the client's 400, its words kept.
  const ApiError refused = error_for_prompt(
      template_error("{{ raise_exception('Conversation roles must alternate') }}"), "messages");
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.param, "messages");
  EXPECT_NE(refused.message.find("Conversation roles must alternate"), std::string::npos);
  // A conversation that outgrows the sandbox, and an error without a kind: the request's.
  EXPECT_EQ(error_for_prompt(template_error("{{ range(100001) | length }}")).status, 400);
  EXPECT_EQ(error_for_prompt(Error{"message content contains a marker reserved by drift"}).status,
            400);
  // The same mapping for a refusal that arrives as the engine's finish.
  EXPECT_EQ(error_for_rejection(rejected(RejectReason::kChatTemplateFailed)).status, 500);
  EXPECT_EQ(
      error_for_rejection(rejected(RejectReason::kChatTemplateRefused), {.prompt = "messages"})
          .param,
      "messages");
}

}  // namespace
}  // namespace drift::server
