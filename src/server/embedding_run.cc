#include "server/embedding_run.h"

#include <algorithm>
#include <bit>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "server/openai_response.h"
#include "server/rejection_error.h"

namespace drift::server {

std::string base64_float32(std::span<const float> values) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> bytes;
  bytes.reserve(values.size() * 4);
  for (float v : values) {
    const uint32_t bits = std::bit_cast<uint32_t>(v);
    for (int shift = 0; shift < 32; shift += 8) bytes.push_back(uint8_t(bits >> shift));
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t group = uint32_t(bytes[i]) << 16;
    if (n > 1) group |= uint32_t(bytes[i + 1]) << 8;
    if (n > 2) group |= uint32_t(bytes[i + 2]);
    out += kAlphabet[(group >> 18) & 63];
    out += kAlphabet[(group >> 12) & 63];
    out += n > 1 ? kAlphabet[(group >> 6) & 63] : '=';
    out += n > 2 ? kAlphabet[group & 63] : '=';
  }
  return out;
}

nlohmann::json embeddings_json(const std::string& model,
                               const std::vector<std::vector<float>>& embeddings,
                               EmbeddingEncoding encoding, int64_t prompt_tokens) {
  nlohmann::json data = nlohmann::json::array();
  for (size_t i = 0; i < embeddings.size(); ++i) {
    nlohmann::json vector = encoding == EmbeddingEncoding::kBase64
                                ? nlohmann::json(base64_float32(embeddings[i]))
                                : nlohmann::json(embeddings[i]);
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(vector)}});
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

EmbeddingRun::EmbeddingRun(boost::asio::io_context& io, Engine& engine,
                           std::shared_ptr<HttpExchange> exchange, EmbeddingSpec spec, Done done)
    : io_(io),
      engine_(engine),
      exchange_(std::move(exchange)),
      spec_(std::move(spec)),
      done_(std::move(done)),
      handles_(spec_.inputs.size()),
      embeddings_(spec_.inputs.size()) {}

void EmbeddingRun::start() {
  auto self = shared_from_this();
  exchange_->on_disconnect([self] {
    if (self->ended_) return;
    self->outcome_.client_gone = true;
    self->end(499);  // nginx's "client closed request", for the log only
  });
  submit_next();
}

void EmbeddingRun::submit_next() {
  // Rule: keep max_in_flight inputs in the engine until every input has been submitted.
  while (!ended_ && submitted_ < spec_.inputs.size() &&
         submitted_ - finished_ < spec_.max_in_flight) {
    const size_t i = submitted_++;
    Request request;
    request.prompt = std::move(spec_.inputs[i]);
    request.pooling = spec_.pooling;
    // Runs on the engine's worker thread (or here, for an immediate rejection): only hands the
    // event over to the I/O thread.
    auto on_event = [&io = io_, weak = weak_from_this(), i](TokenEvent event) {
      boost::asio::post(io, [weak, i, event = std::move(event)]() mutable {
        if (auto run = weak.lock()) run->on_event(i, std::move(event));
      });
    };
    handles_[i] = engine_.submit(std::move(request), on_event);
  }
}

void EmbeddingRun::on_event(size_t index, TokenEvent event) {
  if (ended_ || !event.finish) return;
  const Finish& f = *event.finish;
  switch (f.reason) {
    case FinishReason::kRejected:
      return fail(error_for_rejection(f, {.prompt = "input"}));
    case FinishReason::kCancelled:
      return fail(
          unavailable(f.message.empty() ? "the request was cancelled by the server" : f.message));
    case FinishReason::kError:
    case FinishReason::kLength:
      return fail(internal_error("embedding failed: " + f.message));
    case FinishReason::kStop:
      break;
  }
  if (event.embedding.empty()) return fail(internal_error("the engine returned no embedding"));
  embeddings_[index] = std::move(event.embedding);
  outcome_.prompt_tokens += f.usage.prompt_tokens;
  handles_[index] = RequestHandle();
  if (++finished_ == spec_.inputs.size()) return complete();
  submit_next();
}

void EmbeddingRun::complete() {
  exchange_->respond(200, "application/json",
                     spec_.reply
                         ? spec_.reply(embeddings_, outcome_.prompt_tokens)
                         : dump_json(embeddings_json(spec_.model, embeddings_, spec_.encoding,
                                                     outcome_.prompt_tokens)));
  end(200);
}

void EmbeddingRun::fail(const ApiError& error) {
  HttpExchange::Headers headers;
  if (error.retry_after_seconds)
    headers.emplace_back("Retry-After", std::to_string(*error.retry_after_seconds));
  exchange_->respond(error.status, "application/json",
                     spec_.error_body ? spec_.error_body(error) : error_json(error), headers);
  end(error.status);
}

void EmbeddingRun::end(int status) {
  if (ended_) return;
  ended_ = true;
  outcome_.status = status;
  // Dropping the handles cancels the inputs still queued or running.
  for (RequestHandle& h : handles_) h = RequestHandle();
  auto keep = shared_from_this();  // the disconnect callback may hold the last reference
  exchange_->on_disconnect(nullptr);
  if (done_) done_(outcome_);
}

}  // namespace drift::server
