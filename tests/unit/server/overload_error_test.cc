// Engine refusals become HTTP errors: an overload carries its retry time as Retry-After.
#include <gtest/gtest.h>

#include "server/generation.h"

namespace drift::server {
namespace {

TEST(OverloadError, APredictedWaitBecomes429WithRetryAfterRoundedUp) {
  Finish f;
  f.reason = FinishReason::kRejected;
  f.message = "overloaded: predicted time to first token 7.30 s exceeds max_ttft 5.00 s";
  f.retry_after_seconds = 2.3;
  ApiError e = error_for_rejection(f);
  EXPECT_EQ(e.status, 429);
  EXPECT_EQ(e.code, "overloaded");
  EXPECT_EQ(e.retry_after_seconds, 3);
  f.retry_after_seconds = 0.01;  // never "retry now"
  EXPECT_EQ(error_for_rejection(f).retry_after_seconds, 1);
}

TEST(OverloadError, OtherRefusalsKeepTheirStatus) {
  Finish f;
  f.reason = FinishReason::kRejected;
  f.message = "the engine is shutting down";
  EXPECT_EQ(error_for_rejection(f).status, 503);
  f.message = "request 3: priority 2 needs the priority scheduling policy (--policy priority)";
  ApiError e = error_for_rejection(f);
  EXPECT_EQ(e.status, 400);
  EXPECT_FALSE(e.retry_after_seconds);
}

// The messages are session_store.cc's.
TEST(OverloadError, SessionCapsAre429AndABusySessionIs409) {
  Finish f;
  f.reason = FinishReason::kRejected;
  f.message =
      "too many sessions: all 2 (sessions.max_sessions) are open; end one, or wait for an idle "
      "one to expire after 600 s";
  ApiError e = error_for_rejection(f);
  EXPECT_EQ(e.status, 429);
  EXPECT_EQ(e.retry_after_seconds, 1);
  EXPECT_EQ(e.code, "session_limit");
  f.message = "session token cap: this turn needs up to 90 tokens (10 prompt + 80 max_tokens)";
  EXPECT_EQ(error_for_rejection(f).status, 429);
  f.message =
      "session s1 has a turn running (request 7): wait for it to finish, or kill the session";
  e = error_for_rejection(f);
  EXPECT_EQ(e.status, 409);
  EXPECT_EQ(e.code, "session_busy");
  EXPECT_EQ(e.param, "session_id");
}

}  // namespace
}  // namespace drift::server
