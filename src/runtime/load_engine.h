// The composition root of ARCHITECTURE.md: builds an Engine for a GGUF file with the CPU executor.
// The only library that knows both the engine and an executor; the programs (cli, server,
// Python) get their engine here.
#pragma once

#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine/engine_config.h"
#include "kernels/kv_format.h"
#include "util/error.h"

namespace drift {

// Loads the GGUF model and its tokenizer and runs it on the CPU executor with config.threads
// compute threads (the ISA the CPU supports best, or DRIFT_ISA's).
Expected<std::unique_ptr<Engine>> load_engine(const std::string& model_path,
                                              const EngineConfig& config);

// The executor's storage format of an engine KV dtype (the two enums are kept apart because kv/
// may not know the kernels; both count a page's bytes alike, tests/unit/runtime checks it).
kernels::KvFormat kv_format_of(KVDtype dtype);

}  // namespace drift
