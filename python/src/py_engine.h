// The engine as the Python package drives it: loaded through the composition root
// (runtime/load_engine.h) like `drift generate` and `drift serve`, fed through Engine::submit.
// Every call that waits on the engine releases the GIL; refusals come back as Python exceptions
// carrying the engine's message (ValueError for a request or option the engine judged invalid,
// drift.EngineError for the rest).
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "stream_channel.h"

namespace drift::python {

// Raised as drift.EngineError: the engine failed, is overloaded or shutting down, or the model
// cannot be loaded.
class EngineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws the exception a finished request's refusal or failure maps to; returns for a request
// that ended normally (stop, length, cancelled).
void raise_if_failed(const Finish& finish);

// What one request of a batch produced.
struct BatchOutcome {
  std::vector<TokenId> prompt_token_ids;
  std::vector<TokenId> token_ids;  // generated, a final stop token included
  std::string text;
  Finish finish;
};

// One streamed request: cancels it when destroyed (or when cancel() is called).
class StreamHandle {
 public:
  explicit StreamHandle(RequestHandle handle) : handle_(std::move(handle)) {}
  uint64_t prompt_tokens() const { return uint64_t(handle_.prompt_tokens()); }
  void cancel() { handle_.cancel(); }

 private:
  RequestHandle handle_;
};

class PyEngine {
 public:
  // Loads `model_path` with the engine options (named as the CLI's flags) and, if given, a chat
  // template's text in place of the model's.
  PyEngine(const std::string& model_path, const nanobind::dict& options,
           std::optional<std::string> chat_template);

  // Runs every request to its end and returns their outcomes in order. All are submitted at once
  // (at most max_queued in flight, more as earlier ones finish) so the engine batches them. The
  // GIL is released while waiting; Ctrl-C cancels the batch. A request the engine refuses
  // raises (the others are cancelled).
  std::vector<BatchOutcome> run_batch(std::vector<Request> requests);

  // Submits one request whose events go to `channel` under `key`. A refusal arrives there as
  // the request's finish event.
  StreamHandle submit_stream(Request request, std::shared_ptr<StreamChannel> channel, uint64_t key);

  std::vector<TokenId> tokenize(Prompt prompt) const;
  std::string detokenize(const std::vector<TokenId>& ids, bool render_special) const;
  // EngineMetrics as a dict: num_running, num_waiting, kv pages, prefix cache counters,
  // finished requests by reason, ...
  nanobind::dict stats() const;
  const EngineSetup& setup() const { return engine().setup(); }
  // Ends the requests still running ("cancelled") and stops the engine's threads; later calls
  // raise EngineError. Also done when the object is collected.
  void shutdown();

 private:
  Engine& engine() const;

  std::unique_ptr<Engine> engine_;
};

}  // namespace drift::python
