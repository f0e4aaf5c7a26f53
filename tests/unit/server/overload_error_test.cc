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

}  // namespace
}  // namespace drift::server
