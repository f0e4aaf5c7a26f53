// Shared by the speculative decoding model tests: run requests through an engine, alone (one
// after the other) or batched (all at once), keeping each one's tokens and logprobs, and compare
// two runs token for token and logprob for logprob (speculation must change neither).
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace drift::test {

struct SpecOutput {
  std::vector<TokenId> tokens;
  std::vector<TokenLogprobs> logprobs;
};

// Submits `requests` (concurrently, or each after the one before finished) and returns their
// outputs in order; every request must run to its length.
inline std::vector<SpecOutput> run_requests(Engine& engine, std::vector<Request> requests,
                                            bool concurrent) {
  std::vector<SpecOutput> outputs(requests.size());
  std::mutex mutex;
  std::condition_variable done;
  size_t finished = 0;
  std::vector<RequestHandle> handles;
  for (size_t i = 0; i < requests.size(); ++i) {
    handles.push_back(engine.submit(std::move(requests[i]), [&, i](TokenEvent e) {
      std::lock_guard lock(mutex);
      if (e.token) outputs[i].tokens.push_back(*e.token);
      if (e.logprobs) outputs[i].logprobs.push_back(*e.logprobs);
      if (e.finish) {
        EXPECT_EQ(e.finish->reason, FinishReason::kLength) << e.finish->message;
        ++finished;
        done.notify_one();
      }
    }));
    if (!concurrent) {
      std::unique_lock lock(mutex);
      done.wait(lock, [&] { return finished == i + 1; });
    }
  }
  std::unique_lock lock(mutex);
  done.wait(lock, [&] { return finished == requests.size(); });
  return outputs;
}

inline void expect_same_outputs(const std::vector<SpecOutput>& got,
                                const std::vector<SpecOutput>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i));
    EXPECT_EQ(got[i].tokens, want[i].tokens);
    ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size());
    for (size_t k = 0; k < want[i].logprobs.size(); ++k)
      EXPECT_EQ(std::memcmp(&got[i].logprobs[k], &want[i].logprobs[k], sizeof(TokenLogprobs)), 0)
          << "token " << k;
  }
}

}  // namespace drift::test
