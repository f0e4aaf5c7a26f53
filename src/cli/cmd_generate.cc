// `drift generate -m MODEL -p TEXT -n N [sampling options]`: streams a continuation of the prompt
// to stdout (logs go to stderr) and stops at any end-of-generation token of the model.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "model/forward_pass.h"
#include "model_locator.h"
#include "sampling/sampler.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace drift::cli {
namespace {

struct GenerateOptions {
  std::optional<std::string> model;
  std::string prompt;
  int64_t max_tokens = 128;
  int64_t context = 4096;
  int threads = 2;
  bool ignore_eos = false;
  SamplingParams sampling;
  std::optional<int32_t> top_k;
  std::optional<uint64_t> seed;
};

int run_generate(GenerateOptions o) {
  auto fail = [](const Error& e) {
    fmt::print(stderr, "error: {}\n", e.message);
    return 1;
  };
  o.sampling.top_k = o.top_k;
  o.sampling.seed = o.seed.value_or(
      static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()));
  o.sampling.ignore_eos = o.ignore_eos;
  if (Status s = o.sampling.validate(); !s.ok()) return fail(s.error());
  auto path = resolve_model_path(o.model);
  if (!path.ok()) return fail(path.error());
  auto isa = select_isa(detect_cpu_features());
  if (!isa.ok()) return fail(isa.error());
  auto model = Model::load(*path, *isa);
  if (!model.ok()) return fail(model.error());
  auto tokenizer = Tokenizer::from_gguf((*model)->file());
  if (!tokenizer.ok()) return fail(tokenizer.error());
  const ModelConfig& c = (*model)->config();

  std::vector<int32_t> tokens = tokenizer->encode(o.prompt);
  if (tokens.empty()) return fail(make_error("the prompt is empty"));
  const int64_t context = std::min<int64_t>(o.context, c.n_ctx_train);
  const int64_t prompt_len = static_cast<int64_t>(tokens.size());
  if (prompt_len + o.max_tokens > context)
    return fail(make_error("prompt ({} tokens) + -n {} exceeds the context of {} tokens",
                           prompt_len, o.max_tokens, context));

  constexpr int64_t kPageSize = 16;
  const int64_t n_pages = (context + kPageSize - 1) / kPageSize;
  auto kv = KvPages::create(c, n_pages, kPageSize);
  if (!kv.ok()) return fail(kv.error());
  const int64_t batch = std::min<int64_t>(prompt_len, 512);
  auto forward = ForwardPass::create(**model, ForwardLimits{batch, 1, context, o.threads});
  if (!forward.ok()) return fail(forward.error());
  ThreadPool pool(o.threads);
  std::vector<int32_t> pages(n_pages);
  for (int64_t i = 0; i < n_pages; ++i) pages[i] = static_cast<int32_t>(i);
  std::vector<float> logits(c.n_vocab);
  SamplerScratch scratch(c.n_vocab);
  StreamingDecoder decoder(*tokenizer);
  tokens.reserve(prompt_len + o.max_tokens);

  // Runs tokens[start, end) and leaves the last one's logits in `logits`.
  auto forward_range = [&](int64_t start, int64_t end) -> Status {
    ForwardSequence s;
    s.n_tokens = end - start;
    s.start_pos = start;
    s.page_table = pages;
    s.want_logits = true;
    std::span<const int32_t> span(tokens.data() + start, end - start);
    return (*forward)->run(ForwardBatch{span, std::span<const ForwardSequence>(&s, 1)}, *kv, pool,
                           logits);
  };

  auto start = std::chrono::steady_clock::now();
  for (int64_t done = 0; done < prompt_len; done += batch) {
    Status s = forward_range(done, std::min(prompt_len, done + batch));
    if (!s.ok()) return fail(s.error());
  }
  auto first_token = std::chrono::steady_clock::now();
  int64_t generated = 0;
  std::string finish = "length";
  while (generated < o.max_tokens) {
    int32_t token = sample_token(logits, o.sampling, tokens, prompt_len, *o.sampling.seed, scratch);
    tokens.push_back(token);
    ++generated;
    bool stop = (!o.ignore_eos && tokenizer->is_eog(token));
    for (int32_t id : o.sampling.stop_token_ids) stop |= id == token;
    if (stop) {
      finish = "stop";
      break;
    }
    auto text = decoder.push(token);
    if (!text.ok()) return fail(text.error());
    fmt::print("{}", *text);
    std::fflush(stdout);
    if (generated == o.max_tokens) break;
    Status s = forward_range(static_cast<int64_t>(tokens.size()) - 1, tokens.size());
    if (!s.ok()) return fail(s.error());
  }
  fmt::print("{}\n", decoder.finish());
  auto end = std::chrono::steady_clock::now();
  double prefill = std::chrono::duration<double>(first_token - start).count();
  double decode = std::chrono::duration<double>(end - first_token).count();
  fmt::print(stderr,
             "finish: {}; prompt {} tokens in {:.3f} s ({:.1f} t/s); {} generated in {:.3f} s "
             "({:.1f} t/s)\n",
             finish, prompt_len, prefill, prompt_len / prefill, generated, decode,
             generated / decode);
  return 0;
}

}  // namespace

void register_generate(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Stream a continuation of a prompt");
  cmd->add_option("-m,--model", o->model, "GGUF file (default: the cached default model)");
  cmd->add_option("-p,--prompt", o->prompt, "prompt text (special-token text is parsed)")
      ->required();
  cmd->add_option("-n,--n-predict", o->max_tokens, "tokens to generate at most")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--temp", o->sampling.temperature, "temperature (0: greedy)")
      ->capture_default_str();
  cmd->add_option("--top-k", o->top_k, "keep the k most likely tokens");
  cmd->add_option("--top-p", o->sampling.top_p, "nucleus sampling mass")->capture_default_str();
  cmd->add_option("--min-p", o->sampling.min_p, "drop tokens below min-p x the best")
      ->capture_default_str();
  cmd->add_option("--repeat-penalty", o->sampling.repetition_penalty, "repetition penalty")
      ->capture_default_str();
  cmd->add_option("--presence-penalty", o->sampling.presence_penalty, "presence penalty")
      ->capture_default_str();
  cmd->add_option("--frequency-penalty", o->sampling.frequency_penalty, "frequency penalty")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "random seed (default: from the clock)");
  cmd->add_option("-t,--threads", o->threads, "compute threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("-c,--ctx-size", o->context, "context length (capped by the model's)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 24));
  cmd->add_flag("--ignore-eos", o->ignore_eos, "keep generating past end-of-generation tokens");
  cmd->callback([o] {
    int code = run_generate(*o);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace drift::cli
