#include "engine/request_handle.h"

#include "engine/gateway.h"

namespace drift {

RequestHandle& RequestHandle::operator=(RequestHandle&& other) noexcept {
  if (this != &other) {
    release();
    stream_ = std::move(other.stream_);
    gateway_ = std::move(other.gateway_);
    prompt_tokens_ = other.prompt_tokens_;
  }
  return *this;
}

RequestHandle::~RequestHandle() { release(); }

void RequestHandle::release() {
  if (!stream_) return;
  cancel();
  stream_->detach();
  stream_.reset();
  gateway_.reset();
}

void RequestHandle::cancel() {
  // The flag stops a request the worker has not taken yet; the queued cancel reaches one it has.
  if (!stream_ || stream_->finished() || !stream_->request_cancel()) return;
  if (gateway_) gateway_->cancel(stream_);
}

Expected<Completion> RequestHandle::wait() {
  if (!stream_->pull_delivery())
    return make_error("request {} delivers its events to a callback; wait() has none to gather",
                      stream_->id());
  Completion completion;
  while (std::optional<TokenEvent> event = next()) {
    if (event->token) completion.tokens.push_back(*event->token);
    completion.text += event->text;
    if (!event->embedding.empty()) completion.embedding = std::move(event->embedding);
    if (event->finish) {
      completion.finish = std::move(*event->finish);
      return completion;
    }
  }
  return make_error("request {}: its finish event was already taken by next()", stream_->id());
}

}  // namespace drift
