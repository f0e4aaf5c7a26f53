// One /v1/embeddings request in flight: an engine request per input (prefill only, pooled by the
// engine), their vectors, and the response in OpenAI's shape. It lives on the I/O thread: engine
// events arrive on the engine's worker thread and are posted here.
//
// Inputs are submitted a window at a time (at most `max_in_flight` engine requests, the next one
// when one finishes), so that a request of 2048 inputs neither fills the engine's queue, where it
// would crowd out every other client, nor is refused for it; the engine batches the window's
// prefills with whatever else runs. The first failure ends the request with its error, and
// dropping the handles cancels the inputs still running; a client that leaves does the same.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/embedding_schema.h"
#include "server/http_server.h"

namespace boost::asio {
class io_context;
}

namespace drift::server {

struct EmbeddingSpec {
  std::string model;           // the served name, for the response
  std::vector<Prompt> inputs;  // token ids, in index order
  PoolingMode pooling = PoolingMode::kMean;
  EmbeddingEncoding encoding = EmbeddingEncoding::kFloat;
  size_t max_in_flight = 1;  // >= 1
  // The body of the answer and of an error, in the route's API's shape; OpenAI's
  // (embeddings_json, error_json) when unset.
  std::function<std::string(const std::vector<std::vector<float>>& embeddings,
                            int64_t prompt_tokens)>
      reply;
  std::function<std::string(const ApiError&)> error_body;
};

// What a finished run reports, for the access log.
struct EmbeddingOutcome {
  int status = 200;
  int64_t prompt_tokens = 0;
  bool client_gone = false;
};

class EmbeddingRun : public std::enable_shared_from_this<EmbeddingRun> {
 public:
  using Done = std::function<void(const EmbeddingOutcome&)>;

  EmbeddingRun(boost::asio::io_context& io, Engine& engine, std::shared_ptr<HttpExchange> exchange,
               EmbeddingSpec spec, Done done);
  // Submits the first window of inputs and watches for the client leaving.
  void start();

 private:
  void submit_next();
  void on_event(size_t index, TokenEvent event);
  void fail(const ApiError& error);
  void complete();
  void end(int status);

  boost::asio::io_context& io_;
  Engine& engine_;
  std::shared_ptr<HttpExchange> exchange_;
  EmbeddingSpec spec_;
  Done done_;
  std::vector<RequestHandle> handles_;          // [inputs]
  std::vector<std::vector<float>> embeddings_;  // [inputs]
  size_t submitted_ = 0;
  size_t finished_ = 0;
  bool ended_ = false;
  EmbeddingOutcome outcome_;
};

// The little-endian bytes of `values` as float32, base64-encoded (RFC 4648, with padding): the
// "base64" encoding_format, which OpenAI's clients decode with numpy.frombuffer(..., "float32").
std::string base64_float32(std::span<const float> values);

// The response body: {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
// "model", "usage": {"prompt_tokens", "total_tokens"}}.
nlohmann::json embeddings_json(const std::string& model,
                               const std::vector<std::vector<float>>& embeddings,
                               EmbeddingEncoding encoding, int64_t prompt_tokens);

}  // namespace drift::server
