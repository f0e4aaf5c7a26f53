#include "runtime/draft_model_loader.h"

#include "executor/cpu_executor.h"
#include "model/model.h"

namespace drift {

namespace {

// Rule: the draft's token ids are fed to the target as they are, so every id must mean the same
// text in both: the same count of tokens (and of logits rows), the same text at every id.
Status check_same_vocabulary(const LoadedModel& draft, const LoadedModel& target) {
  const GgufFile& d = draft.model->file();
  const GgufFile& t = target.model->file();
  constexpr std::string_view kTokens = "tokenizer.ggml.tokens";
  DRIFT_ASSIGN_OR_RETURN(const GgufArray* draft_tokens, d.get_array(kTokens));
  DRIFT_ASSIGN_OR_RETURN(const GgufArray* target_tokens, t.get_array(kTokens));
  if (draft_tokens->strings.size() != target_tokens->strings.size() ||
      draft.facts.vocab_size != target.facts.vocab_size)
    return make_error(
        "--spec-draft-model: the vocabulary of {} ({} tokens, {} logits) is not that of {} ({} "
        "tokens, {} logits); a draft model must share the model's tokenizer",
        d.path(), draft_tokens->strings.size(), draft.facts.vocab_size, t.path(),
        target_tokens->strings.size(), target.facts.vocab_size);
  for (size_t id = 0; id < draft_tokens->strings.size(); ++id)
    if (draft_tokens->strings[id] != target_tokens->strings[id])
      return make_error(
          "--spec-draft-model: token {} is '{}' in {} but '{}' in {}; a draft model must share "
          "the model's tokenizer",
          id, draft_tokens->strings[id], d.path(), target_tokens->strings[id], t.path());
  return Status::Ok();
}

}  // namespace

Expected<LoadedModel> load_draft_model(const std::string& draft_path, const LoadedModel& target) {
  Expected<LoadedModel> draft = load_model(draft_path);
  if (!draft.ok())
    return make_error("--spec-draft-model {}: {}", draft_path, draft.error().message);
  DRIFT_RETURN_IF_ERROR(check_same_vocabulary(*draft, target));
  return draft;
}

Expected<std::unique_ptr<Executor>> make_draft_executor(const LoadedModel& draft,
                                                        const DraftExecutorSetup& setup) {
  CpuExecutorConfig c;
  c.threads = setup.threads;
  c.num_pages = setup.num_kv_pages;
  c.page_size = setup.kv_layout.page_size;
  c.kv_format = kv_format_of(setup.kv_layout.dtype);
  c.max_batch_tokens = setup.drafter.max_pass_tokens();
  c.max_batch_sequences = setup.drafter.max_sequences;
  c.max_context = setup.drafter.max_context + setup.drafter.max_draft_tokens;
  DRIFT_ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutor> executor,
                         CpuExecutor::create(*draft.model, c));
  return std::unique_ptr<Executor>(std::move(executor));
}

}  // namespace drift
