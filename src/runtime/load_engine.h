// The composition root of ARCHITECTURE.md: builds an Engine for a GGUF file with the CPU executor.
// The only library that knows both the engine and an executor; the programs (cli, server,
// Python) get their engine here.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "engine/engine_config.h"
#include "engine/text_codec.h"
#include "kernels/kv_format.h"
#include "runtime/engine_options.h"
#include "util/error.h"

namespace drift {

class Model;

struct ModelLoadOptions {
  // A Jinja chat template's text that replaces the model's (--chat-template FILE). Absent: the
  // model's, or ChatML when it has none (with a warning).
  std::optional<std::string> chat_template;
};

struct ExecutorOptions {
  // Fault injection (drift serve --debug-fail-at-step): the executor fails for good at this
  // 1-based step (failing_executor.h). Absent: never.
  std::optional<int64_t> debug_fail_at_step;
};

// A GGUF model ready to run: its weights (for the ISA the CPU supports best, or DRIFT_ISA's), its
// tokenizer with the chat prompt builder, and what the engine must know of it.
struct LoadedModel {
  std::shared_ptr<const Model> model;
  std::shared_ptr<const TextCodec> codec;
  ModelFacts facts;
};

// Loads the GGUF model (the file is opened once). Errors are about the file: missing, malformed,
// an unsupported architecture or format, a chat template that does not parse.
Expected<LoadedModel> load_model(const std::string& model_path,
                                 const ModelLoadOptions& options = {});

// Runs `model` on the CPU executor with config.threads compute threads, publishing KV events when
// `kv_events` has an endpoint. Errors are about the configuration (the field named), the memory
// it asks for, or the event endpoint.
Expected<std::unique_ptr<Engine>> start_engine(const LoadedModel& model, const EngineConfig& config,
                                               const ExecutorOptions& executor = {},
                                               const KVEventsOptions& kv_events = {});

// load_model, then start_engine. The engine then owns every prompt decision: programs submit
// text, conversations or ids, and ask it to tokenize.
Expected<std::unique_ptr<Engine>> load_engine(const std::string& model_path,
                                              const EngineConfig& config,
                                              const ModelLoadOptions& options = {},
                                              const ExecutorOptions& executor = {},
                                              const KVEventsOptions& kv_events = {});

// The executor's storage format of an engine KV dtype (the two enums are kept apart because kv/
// may not know the kernels; both count a page's bytes alike, tests/unit/runtime checks it).
kernels::KvFormat kv_format_of(KVDtype dtype);

}  // namespace drift
