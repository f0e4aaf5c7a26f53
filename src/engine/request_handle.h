// The caller's side of one submitted request: its events, and cancel. Move-only; destroying a
// handle cancels its request (a no-op once it has finished) and, in callback delivery, waits
// for a callback in progress and stops later ones.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/request_stream.h"
#include "util/error.h"

namespace drift {

class Gateway;

// Everything a request's events carried, for callers that only want the end result.
struct Completion {
  std::vector<TokenId> tokens;   // generated, a final stop token included
  std::string text;              // the concatenated text deltas
  std::vector<float> embedding;  // an embedding request's vector
  Finish finish;
};

class RequestHandle {
 public:
  RequestHandle() = default;
  // `prompt_tokens`: the prompt's length as the engine tokenized it.
  RequestHandle(std::shared_ptr<RequestStream> stream, std::shared_ptr<Gateway> gateway,
                int32_t prompt_tokens = 0)
      : stream_(std::move(stream)), gateway_(std::move(gateway)), prompt_tokens_(prompt_tokens) {}
  RequestHandle(RequestHandle&&) noexcept = default;
  RequestHandle& operator=(RequestHandle&& other) noexcept;
  RequestHandle(const RequestHandle&) = delete;
  RequestHandle& operator=(const RequestHandle&) = delete;
  ~RequestHandle();

  bool valid() const { return stream_ != nullptr; }
  RequestId id() const { return stream_->id(); }
  // The prompt's tokens as the engine tokenized it (a session turn's history included), known
  // when submit returns: the usage a caller reports even if it stops reading before the finish.
  // 0 when the prompt could not be tokenized.
  int32_t prompt_tokens() const { return prompt_tokens_; }

  // Pull delivery: the next event, blocking until there is one. nullopt once the finish event
  // has been returned (and always in callback delivery).
  std::optional<TokenEvent> next() { return stream_->next(std::nullopt); }
  // As next(), waiting at most `timeout`; nullopt also when it expires.
  std::optional<TokenEvent> next_for(std::chrono::nanoseconds timeout) {
    return stream_->next(timeout);
  }
  // The finish event has been returned by next() or passed to the callback.
  bool finished() const { return stream_->finished(); }

  // Pull delivery: waits for the remaining events and gathers them (events already taken with
  // next() are not included). An error in callback delivery, where events go to the callback.
  Expected<Completion> wait();

  // Asks the engine to end the request. Returns at once; the request then finishes with
  // "cancelled" at the next step boundary, freeing its KV pages — unless it finished first.
  // Safe from any thread, and more than once.
  void cancel();

 private:
  void release();

  std::shared_ptr<RequestStream> stream_;
  std::shared_ptr<Gateway> gateway_;
  int32_t prompt_tokens_ = 0;
};

}  // namespace drift
