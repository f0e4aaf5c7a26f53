// `drift batched-bench`: the "batched" workload of BENCHMARKS.md, as llama-batched-bench
// measures it — for each N in --npl, N sequences of --npp random prompt tokens each generate --ntg
// tokens, all submitted at once to the engine (continuous batching, N sequences at a time).
//
// The engine overlaps the phases (a sequence decodes while others still prefill), so they are
// split at the moment the last sequence got its first token: T_PP is the time until then and
// S_PP = N * npp / T_PP; S_TG counts only the tokens generated after it, when all N decode
// together; S is all prompt and generated tokens over the whole time. A table for people, then
// one JSON line per N for scripts.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "engine/engine.h"
#include "engine_flags.h"
#include "model_locator.h"
#include "runtime/load_engine.h"
#include "sampling/random_stream.h"

namespace drift::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BatchedBenchOptions {
  std::optional<std::string> model;
  int32_t prompt_tokens = 128;
  int32_t gen_tokens = 128;
  std::vector<int32_t> parallel_levels = {1, 2, 4, 8, 16, 32, 64};
  EngineOptions engine;
};

struct LevelResult {
  int32_t n = 0;
  double t_pp = 0, s_pp = 0, t_tg = 0, s_tg = 0, t = 0, s = 0;
  // Speculative decoding (--spec): draft tokens verified in the level and accepted.
  uint64_t draft_tokens = 0, accepted_tokens = 0;
};

// Runs N requests at once; the times of every generated token, per request.
Expected<LevelResult> run_level(Engine& engine, int32_t n, const BatchedBenchOptions& o,
                                int32_t vocab, uint64_t round) {
  std::vector<std::vector<Clock::time_point>> times(n);
  const EngineMetrics before = engine.metrics();
  std::mutex mutex;
  std::condition_variable done;
  int32_t finished = 0;
  std::optional<std::string> failure;
  std::vector<RequestHandle> handles;
  handles.reserve(n);
  const Clock::time_point start = Clock::now();
  for (int32_t i = 0; i < n; ++i) {
    // Distinct random prompts, so that no request can reuse another's KV.
    std::vector<TokenId> prompt(o.prompt_tokens);
    for (int32_t k = 0; k < o.prompt_tokens; ++k)
      prompt[k] = static_cast<TokenId>(stream_bits(round * 1000003 + i, k) % vocab);
    Request r;
    r.prompt = std::move(prompt);
    r.max_tokens = o.gen_tokens;
    r.sampling.temperature = 0;
    r.sampling.ignore_eos = true;
    handles.push_back(engine.submit(std::move(r), [&, i](TokenEvent event) {
      if (event.token) times[i].push_back(Clock::now());
      if (event.finish) {
        std::lock_guard lock(mutex);
        if (event.finish->reason != FinishReason::kLength) failure = event.finish->message;
        ++finished;
        done.notify_one();
      }
    }));
  }
  {
    std::unique_lock lock(mutex);
    done.wait(lock, [&] { return finished == n; });
  }
  if (failure) return make_error("a request did not run to its length: {}", *failure);
  const Clock::time_point end = Clock::now();
  Clock::time_point all_prefilled = start;
  for (const auto& t : times) all_prefilled = std::max(all_prefilled, t.front());
  int64_t decoded_after = 0;
  for (const auto& t : times)
    decoded_after += std::count_if(t.begin(), t.end(), [&](auto x) { return x > all_prefilled; });
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  LevelResult r;
  r.n = n;
  r.t_pp = seconds(all_prefilled - start);
  r.s_pp = double(n) * o.prompt_tokens / r.t_pp;
  r.t_tg = seconds(end - all_prefilled);
  r.s_tg = r.t_tg > 0 ? decoded_after / r.t_tg : 0;
  r.t = seconds(end - start);
  r.s = double(n) * (o.prompt_tokens + o.gen_tokens) / r.t;
  const EngineMetrics after = engine.metrics();
  r.draft_tokens = after.spec_draft_tokens - before.spec_draft_tokens;
  r.accepted_tokens = after.spec_accepted_tokens - before.spec_accepted_tokens;
  return r;
}

int run_batched_bench(const BatchedBenchOptions& o) {
  auto fail = [](const Error& e) {
    fmt::print(stderr, "error: {}\n", e.message);
    return 1;
  };
  auto path = resolve_model_path(o.model);
  if (!path.ok()) return fail(path.error());
  // --parallel is the largest level, so that every level runs all its sequences at once.
  EngineOptions engine_options = o.engine;
  engine_options.parallel = *std::max_element(o.parallel_levels.begin(), o.parallel_levels.end());
  auto config = to_engine_config(engine_options);
  if (!config.ok()) return fail(config.error());
  config->max_queued_requests = std::max(config->max_queued_requests, engine_options.parallel);
  config->max_model_len = o.prompt_tokens + o.gen_tokens;
  auto engine = load_engine(*path, *config);
  if (!engine.ok()) return fail(engine.error());
  const int32_t n_vocab = (*engine)->vocab_size();

  // Warm-up (first touch of the weights and KV pages, thread start-up), not measured.
  if (auto warm = run_level(**engine, 1, o, n_vocab, 0); !warm.ok()) return fail(warm.error());

  fmt::print(
      "| PP | TG | B | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s | drafted | "
      "accepted |\n");
  fmt::print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  std::vector<LevelResult> results;
  for (size_t k = 0; k < o.parallel_levels.size(); ++k) {
    auto r = run_level(**engine, o.parallel_levels[k], o, n_vocab, k + 1);
    if (!r.ok()) return fail(r.error());
    fmt::print("| {} | {} | {} | {:.3f} | {:.2f} | {:.3f} | {:.2f} | {:.3f} | {:.2f} | {} | {} |\n",
               o.prompt_tokens, o.gen_tokens, r->n, r->t_pp, r->s_pp, r->t_tg, r->s_tg, r->t, r->s,
               r->draft_tokens, r->accepted_tokens);
    std::fflush(stdout);
    results.push_back(*r);
  }
  for (const LevelResult& r : results) {
    nlohmann::json j = {{"pp", o.prompt_tokens},
                        {"tg", o.gen_tokens},
                        {"pl", r.n},
                        {"threads", o.engine.threads},
                        {"t_pp", r.t_pp},
                        {"speed_pp", r.s_pp},
                        {"t_tg", r.t_tg},
                        {"speed_tg", r.s_tg},
                        {"t", r.t},
                        {"speed", r.s},
                        {"draft_tokens", r.draft_tokens},
                        {"accepted_draft_tokens", r.accepted_tokens}};
    fmt::print("{}\n", j.dump());
  }
  (*engine)->shutdown(ShutdownMode::kDrain);
  return 0;
}

}  // namespace

void register_batched_bench(CLI::App& app) {
  auto o = std::make_shared<BatchedBenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "batched-bench", "Aggregate prefill and decode t/s of N concurrent sequences, N in --npl");
  cmd->add_option("-m,--model", o->model, "GGUF file (default: the cached default model)");
  cmd->add_option("--npp", o->prompt_tokens, "prompt tokens per sequence")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--ntg", o->gen_tokens, "generated tokens per sequence")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--npl", o->parallel_levels, "numbers of parallel sequences")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  // A throughput benchmark, as llama-batched-bench is: no inter-token latency target by default,
  // so that every prompt is prefilled with the whole step budget before the decode phase is timed
  // (with a target, prefill is spread over steps that already decode, and the decode phase
  // starts when most sequences are nearly done). --target-itl-ms sets one.
  o->engine.target_itl_ms = 0;
  register_engine_options(*cmd, o->engine);
  cmd->callback([o] {
    int code = run_batched_bench(*o);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace drift::cli
