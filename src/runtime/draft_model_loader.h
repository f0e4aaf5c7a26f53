// Speculative decoding's draft model for the composition root: a second GGUF, refused unless its
// vocabulary is the target's (same token count, same text at every id), and the factory of its
// CPU executor.
#pragma once

#include <memory>
#include <string>

#include "engine/draft_model.h"
#include "runtime/load_engine.h"
#include "util/error.h"

namespace drift {

// Loads `draft_path` and checks its vocabulary against `target`'s. The errors name both files.
Expected<LoadedModel> load_draft_model(const std::string& draft_path, const LoadedModel& target);

// The CPU executor of a draft model for the engine's DraftModel.
Expected<std::unique_ptr<Executor>> make_draft_executor(const LoadedModel& draft,
                                                        const DraftExecutorSetup& setup);

}  // namespace drift
