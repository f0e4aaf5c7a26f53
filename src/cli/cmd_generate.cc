// `drift generate`: continuations of prompts through the engine.
//   -p TEXT                 one prompt; the continuation streams to stdout as it is generated.
//   --prompts FILE          one prompt per line, run --parallel at a time with continuous
//                           batching; each completion is printed when all are done, in order.
// Logs and a timing summary (tokens/s, TTFT and inter-token latency percentiles) go to stderr;
// --stats-json FILE writes the summary for benchmark scripts.
#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "engine/engine.h"
#include "engine_flags.h"
#include "latency_summary.h"
#include "model_locator.h"
#include "runtime/load_engine.h"
#include "sampling_options.h"

namespace drift::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct GenerateOptions {
  std::optional<std::string> model;
  std::optional<std::string> prompt;
  std::optional<std::string> prompts_file;
  std::optional<std::string> stats_json;
  int32_t max_tokens = 128;
  SamplingOptions sampling;
  EngineOptions engine;
};

// What one request's events showed, as its caller saw them.
struct RequestRecord {
  Clock::time_point submitted;
  std::vector<Clock::time_point> token_times;
  std::string text;
  std::optional<Finish> finish;
};

int fail(const Error& e) {
  fmt::print(stderr, "error: {}\n", e.message);
  return 1;
}

Expected<std::vector<std::string>> read_prompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error("cannot open --prompts file {}", path);
  std::vector<std::string> prompts;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) prompts.push_back(line);
  }
  if (prompts.empty()) return make_error("--prompts file {} has no non-empty line", path);
  return prompts;
}

Request make_request(const std::string& prompt, const GenerateOptions& o,
                     const SamplingSettings& sampling) {
  Request r;
  r.prompt = TextPrompt{prompt, /*add_special=*/true, /*parse_special=*/true};
  r.max_tokens = o.max_tokens;
  r.sampling = sampling;
  return r;
}

// Prints the summary of finished requests to stderr and, if asked, as JSON; with the engine's
// speculative decoding counts (`metrics`) when it drafted.
void report(const std::vector<RequestRecord>& records, Clock::time_point start,
            Clock::time_point end, const GenerateOptions& o, const EngineMetrics& metrics) {
  std::vector<double> ttft, itl;
  int64_t prompt_tokens = 0, generated = 0, failed = 0;
  for (const RequestRecord& r : records) {
    if (!r.finish) continue;
    prompt_tokens += r.finish->usage.prompt_tokens;
    generated += r.finish->usage.completion_tokens;
    if (r.finish->reason == FinishReason::kError || r.finish->reason == FinishReason::kRejected)
      ++failed;
    if (!r.token_times.empty())
      ttft.push_back(std::chrono::duration<double>(r.token_times.front() - r.submitted).count());
    for (size_t i = 1; i < r.token_times.size(); ++i)
      itl.push_back(std::chrono::duration<double>(r.token_times[i] - r.token_times[i - 1]).count());
  }
  const double seconds = std::chrono::duration<double>(end - start).count();
  nlohmann::json j = {
      {"requests", records.size()},
      {"failed", failed},
      {"parallel", o.engine.parallel},
      {"prompt_tokens", prompt_tokens},
      {"generated_tokens", generated},
      {"seconds", seconds},
      {"total_tokens_per_second", (prompt_tokens + generated) / seconds},
      {"generated_tokens_per_second", generated / seconds},
      {"ttft_p50_ms", 1e3 * percentile(ttft, 50)},
      {"ttft_p99_ms", 1e3 * percentile(ttft, 99)},
      {"itl_p50_ms", 1e3 * percentile(itl, 50)},
      {"itl_p99_ms", 1e3 * percentile(itl, 99)},
      {"spec_draft_tokens", metrics.spec_draft_tokens},
      {"spec_accepted_tokens", metrics.spec_accepted_tokens},
      {"spec_draft_model_draft_tokens", metrics.spec_draft_model_draft_tokens},
      {"spec_draft_model_accepted_tokens", metrics.spec_draft_model_accepted_tokens},
      {"spec_draft_model_seconds", metrics.spec_draft_model_seconds},
  };
  fmt::print(stderr,
             "{} requests ({} failed), parallel {}: {} prompt + {} generated tokens in {:.3f} s "
             "({:.1f} generated t/s, {:.1f} total t/s); TTFT p50 {:.1f} ms p99 {:.1f} ms; "
             "inter-token p50 {:.1f} ms p99 {:.1f} ms\n",
             records.size(), failed, o.engine.parallel, prompt_tokens, generated, seconds,
             j["generated_tokens_per_second"].get<double>(),
             j["total_tokens_per_second"].get<double>(), j["ttft_p50_ms"].get<double>(),
             j["ttft_p99_ms"].get<double>(), j["itl_p50_ms"].get<double>(),
             j["itl_p99_ms"].get<double>());
  if (metrics.spec_draft_tokens > 0)
    fmt::print(stderr, "speculative decoding: {} of {} draft tokens accepted ({:.0f}%)\n",
               metrics.spec_accepted_tokens, metrics.spec_draft_tokens,
               100.0 * double(metrics.spec_accepted_tokens) / double(metrics.spec_draft_tokens));
  if (metrics.spec_draft_model_steps > 0)
    fmt::print(stderr,
               "draft model: {} of {} draft tokens accepted, {:.2f} ms a step over {} steps\n",
               metrics.spec_draft_model_accepted_tokens, metrics.spec_draft_model_draft_tokens,
               1e3 * metrics.spec_draft_model_seconds / double(metrics.spec_draft_model_steps),
               metrics.spec_draft_model_steps);
  if (o.stats_json) {
    std::ofstream out(*o.stats_json);
    out << j.dump(2) << "\n";
  }
}

// One prompt, streamed to stdout as its tokens arrive.
int stream_one(Engine& engine, const GenerateOptions& o, const SamplingSettings& sampling) {
  std::vector<RequestRecord> records(1);
  RequestRecord& record = records[0];
  const Clock::time_point start = Clock::now();
  record.submitted = start;
  RequestHandle handle = engine.submit(make_request(*o.prompt, o, sampling));
  while (std::optional<TokenEvent> event = handle.next()) {
    if (event->token) record.token_times.push_back(Clock::now());
    fmt::print("{}", event->text);
    std::fflush(stdout);
    if (event->finish) record.finish = event->finish;
  }
  fmt::print("\n");
  std::fflush(stdout);
  report(records, start, Clock::now(), o, engine.metrics());
  if (record.finish->reason == FinishReason::kError ||
      record.finish->reason == FinishReason::kRejected)
    return fail(make_error("{}", record.finish->message));
  return 0;
}

// Every prompt of the file at once; the engine runs --parallel of them at a time.
int run_batch(Engine& engine, const std::vector<std::string>& prompts, const GenerateOptions& o,
              const SamplingSettings& sampling) {
  std::vector<RequestRecord> records(prompts.size());
  std::mutex mutex;
  std::condition_variable all_done;
  size_t finished = 0;
  std::vector<RequestHandle> handles;
  handles.reserve(prompts.size());
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    records[i].submitted = Clock::now();
    // Runs on the engine's worker thread: record and return, no I/O.
    handles.push_back(
        engine.submit(make_request(prompts[i], o, sampling), [&, i](TokenEvent event) {
          RequestRecord& r = records[i];
          if (event.token) r.token_times.push_back(Clock::now());
          r.text += event.text;
          if (event.finish) {
            r.finish = std::move(event.finish);
            std::lock_guard lock(mutex);
            ++finished;
            all_done.notify_one();
          }
        }));
  }
  {
    std::unique_lock lock(mutex);
    all_done.wait(lock, [&] { return finished == prompts.size(); });
  }
  const Clock::time_point end = Clock::now();
  int failures = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Finish& f = *records[i].finish;
    fmt::print("=== {} ({}: {} prompt + {} generated tokens)\n{}{}\n", i,
               finish_reason_name(f.reason), f.usage.prompt_tokens, f.usage.completion_tokens,
               prompts[i], records[i].text);
    if (f.reason == FinishReason::kError || f.reason == FinishReason::kRejected) {
      fmt::print(stderr, "error: prompt {}: {}\n", i, f.message);
      ++failures;
    }
  }
  report(records, start, end, o, engine.metrics());
  return failures == 0 ? 0 : 1;
}

int run_generate(GenerateOptions o) {
  if (o.prompt.has_value() == o.prompts_file.has_value())
    return fail(make_error("give exactly one of -p/--prompt and --prompts"));
  const SamplingSettings sampling = request_sampling(o.sampling);
  std::vector<std::string> prompts;
  if (o.prompts_file) {
    auto read = read_prompts(*o.prompts_file);
    if (!read.ok()) return fail(read.error());
    prompts = std::move(*read);
  }
  auto path = resolve_model_path(o.model);
  if (!path.ok()) return fail(path.error());
  auto config = to_engine_config(o.engine);
  if (!config.ok()) return fail(config.error());
  if (Status s = apply_sampling_defaults(o.sampling, *config); !s.ok()) return fail(s.error());
  // Every prompt of the file is submitted at once: the queue must take them all.
  config->max_queued_requests =
      std::max<int32_t>(config->max_queued_requests, static_cast<int32_t>(prompts.size()));
  auto engine = load_engine(*path, *config);
  if (!engine.ok()) return fail(engine.error());
  int code =
      o.prompt ? stream_one(**engine, o, sampling) : run_batch(**engine, prompts, o, sampling);
  (*engine)->shutdown(ShutdownMode::kDrain);
  return code;
}

}  // namespace

void register_generate(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  o->engine.parallel = 1;
  CLI::App* cmd = app.add_subcommand("generate", "Continue prompts through the engine");
  cmd->add_option("-m,--model", o->model, "GGUF file (default: the cached default model)");
  cmd->add_option("-p,--prompt", o->prompt, "prompt text, streamed (special-token text is parsed)");
  cmd->add_option("--prompts", o->prompts_file, "file with one prompt per line, run in parallel");
  cmd->add_option("--stats-json", o->stats_json, "write the timing summary here as JSON");
  cmd->add_option("-n,--n-predict", o->max_tokens, "tokens to generate at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  register_sampling_options(*cmd, o->sampling);
  register_engine_options(*cmd, o->engine);
  cmd->callback([o] {
    int code = run_generate(*o);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace drift::cli
