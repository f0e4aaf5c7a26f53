// The composition root of ARCHITECTURE.md: builds an Engine for a GGUF file with the CPU executor.
// The only library that knows both the engine and an executor; the programs (cli, server,
// Python) get their engine here.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "engine/engine_config.h"
#include "kernels/kv_format.h"
#include "util/error.h"

namespace drift {

struct ModelLoadOptions {
  // A Jinja chat template's text that replaces the model's (--chat-template FILE). Absent: the
  // model's, or ChatML when it has none (with a warning).
  std::optional<std::string> chat_template;
  // Fault injection (drift serve --debug-fail-at-step): the executor fails for good at this
  // 1-based step (failing_executor.h). Absent: never.
  std::optional<int64_t> debug_fail_at_step;
};

// Loads the GGUF model (the file is opened once), its tokenizer and chat prompt builder, and runs
// it on the CPU executor with config.threads compute threads (the ISA the CPU supports best, or
// DRIFT_ISA's). The engine then owns every prompt decision: programs submit text, conversations
// or ids, and ask it to tokenize.
Expected<std::unique_ptr<Engine>> load_engine(const std::string& model_path,
                                              const EngineConfig& config,
                                              const ModelLoadOptions& options = {});

// The executor's storage format of an engine KV dtype (the two enums are kept apart because kv/
// may not know the kernels; both count a page's bytes alike, tests/unit/runtime checks it).
kernels::KvFormat kv_format_of(KVDtype dtype);

}  // namespace drift
