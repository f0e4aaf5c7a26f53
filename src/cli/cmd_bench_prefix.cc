// `drift bench-prefix`: the prefix cache and conversation sessions measured at the engine level,
// with the cache off and on in the same run (same model, KV budget and scheduler settings):
//
//   shared  R requests submitted at once that share an S-token system prompt, each with its own
//           Q-token question, G tokens generated: time to first token p50/p99 and total time.
//   chat    C conversations run at once, T turns each; every turn adds a U-token user message to
//           the session and generates V tokens: time to first token p50/p99 of turns 2..T.
//
// Prompts are token ids cut from a fixed text, so every run sends the same tokens. Greedy
// decoding with EOS ignored: every request generates exactly its token count.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "engine/engine.h"
#include "model_locator.h"
#include "runtime/engine_options.h"
#include "runtime/load_engine.h"

namespace drift::cli {
namespace {

struct PrefixBenchOptions {
  std::optional<std::string> model;
  int threads = program_engine_defaults().threads;
  int64_t kv_mib = 1024;
  std::string workload = "both";
  int requests = 32;
  int system_tokens = 1024;
  int question_tokens = 32;
  int gen_tokens = 16;
  int conversations = 8;
  int turns = 6;
  int turn_tokens = 32;
  int turn_gen_tokens = 32;
};

using Clock = std::chrono::steady_clock;

// `n` token ids cut from a numbered text with tag `tag`, so different tags give different ids.
std::vector<TokenId> text_tokens(const TextCodec& codec, const std::string& tag, int n) {
  std::string text;
  std::vector<TokenId> ids;
  for (int i = 0; int(ids.size()) < n; ++i) {
    text += fmt::format(
        " {} {}: the reading room opens at nine, members borrow up to {} books for {} weeks, and "
        "late returns cost {} cents a day.",
        tag, i, 3 + i % 9, 1 + i % 4, 10 + i % 30);
    ids = codec.encode(TextPrompt{text, /*add_special=*/false, /*parse_special=*/false});
  }
  ids.resize(size_t(n));
  return ids;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5));
  return v[i];
}

Request greedy(std::vector<TokenId> prompt, int max_tokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  return r;
}

struct Figures {
  std::vector<double> ttft;  // seconds
  double total = 0;          // seconds
  uint64_t hit_tokens = 0, queried_tokens = 0;
};

Expected<Figures> run_shared(Engine& engine, const PrefixBenchOptions& o) {
  const std::vector<TokenId> system = text_tokens(engine.codec(), "Rule", o.system_tokens);
  std::vector<RequestHandle> handles;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < o.requests; ++i) {
    std::vector<TokenId> prompt = system;
    std::vector<TokenId> q =
        text_tokens(engine.codec(), fmt::format("Question {}", i), o.question_tokens);
    prompt.insert(prompt.end(), q.begin(), q.end());
    handles.push_back(engine.submit(greedy(std::move(prompt), o.gen_tokens)));
  }
  Figures f;
  for (RequestHandle& h : handles) {
    Expected<Completion> c = h.wait();
    if (!c.ok()) return c.error();
    if (c->finish.reason != FinishReason::kLength)
      return make_error("a request ended with {}: {}", finish_reason_name(c->finish.reason),
                        c->finish.message);
    f.ttft.push_back(c->finish.timings.time_to_first_token_seconds.value_or(0));
  }
  f.total = std::chrono::duration<double>(Clock::now() - start).count();
  return f;
}

Expected<Figures> run_chat(Engine& engine, const PrefixBenchOptions& o) {
  std::vector<std::vector<double>> ttft(size_t(o.conversations));
  std::vector<std::optional<Error>> errors(size_t(o.conversations));
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < o.conversations; ++c) {
    threads.emplace_back([&, c] {
      const std::string session = fmt::format("bench-{}", c);
      for (int t = 0; t < o.turns; ++t) {
        Request r =
            greedy(text_tokens(engine.codec(), fmt::format("Chat {} turn {}", c, t), o.turn_tokens),
                   o.turn_gen_tokens);
        r.session_id = session;
        RequestHandle h = engine.submit(std::move(r));
        Expected<Completion> done = h.wait();
        if (!done.ok() || done->finish.reason != FinishReason::kLength) {
          errors[size_t(c)] = done.ok() ? Error{done->finish.message} : done.error();
          return;
        }
        if (t > 0)
          ttft[size_t(c)].push_back(done->finish.timings.time_to_first_token_seconds.value_or(0));
      }
      (void)engine.end_session(session);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::optional<Error>& e : errors)
    if (e) return *e;
  Figures f;
  f.total = std::chrono::duration<double>(Clock::now() - start).count();
  for (const auto& v : ttft) f.ttft.insert(f.ttft.end(), v.begin(), v.end());
  return f;
}

int run_bench_prefix(const PrefixBenchOptions& o) {
  auto fail = [](const Error& e) {
    fmt::print(stderr, "error: {}\n", e.message);
    return 1;
  };
  auto path = resolve_model_path(o.model);
  if (!path.ok()) return fail(path.error());
  const bool shared = o.workload == "shared" || o.workload == "both";
  const bool chat = o.workload == "chat" || o.workload == "both";
  std::string json;
  for (bool cache : {false, true}) {
    EngineConfig c;
    c.threads = o.threads;
    c.kv.budget = KVMemoryBudget::of_bytes(uint64_t(o.kv_mib) << 20);
    c.kv.enable_prefix_caching = cache;
    c.max_model_len = std::max(o.system_tokens + o.question_tokens + o.gen_tokens,
                               o.turns * (o.turn_tokens + o.turn_gen_tokens)) +
                      16;
    c.max_model_len_limit = *c.max_model_len;
    c.scheduler.max_num_seqs = std::max(o.requests, o.conversations);
    c.max_queued_requests = std::max(o.requests, o.conversations) + 1;
    auto engine = load_engine(*path, c);
    if (!engine.ok()) return fail(engine.error());
    auto report = [&](const char* name, Expected<Figures> f, const char* what) -> bool {
      if (!f.ok()) {
        fail(f.error());
        return false;
      }
      const EngineMetrics m = (*engine)->metrics();
      fmt::print(
          "{:<6} cache {:<3}  TTFT{} p50 {:8.3f} s  p99 {:8.3f} s  total {:8.2f} s  "
          "prefix cache hit {} of {} tokens\n",
          name, cache ? "on" : "off", what, percentile(f->ttft, 0.5), percentile(f->ttft, 0.99),
          f->total, m.prefix_cache.hit_tokens, m.prefix_cache.queried_tokens);
      json += fmt::format(
          "{}{{\"workload\": \"{}\", \"prefix_cache\": {}, \"ttft_p50_s\": {:.4f}, "
          "\"ttft_p99_s\": {:.4f}, \"total_s\": {:.3f}}}",
          json.empty() ? "" : ", ", name, cache, percentile(f->ttft, 0.5),
          percentile(f->ttft, 0.99), f->total);
      return true;
    };
    if (shared && !report("shared", run_shared(**engine, o), "")) return 1;
    if (chat) {
      (*engine)->shutdown(ShutdownMode::kDrain);  // a fresh engine: no cache left from `shared`
      engine = load_engine(*path, c);
      if (!engine.ok()) return fail(engine.error());
      if (!report("chat", run_chat(**engine, o), " turns 2+")) return 1;
    }
  }
  fmt::print("{{\"threads\": {}, \"kv_mib\": {}, \"results\": [{}]}}\n", o.threads, o.kv_mib, json);
  return 0;
}

}  // namespace

void register_bench_prefix(CLI::App& app) {
  auto o = std::make_shared<PrefixBenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench-prefix",
      "Engine-level TTFT with the prefix cache off and on: a shared system prompt, "
      "and multi-turn conversations (sessions)");
  cmd->add_option("-m,--model", o->model, "GGUF file (default: the cached default model)");
  cmd->add_option("-t,--threads", o->threads, "compute threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--kv-mib", o->kv_mib, "KV cache budget in MiB")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--workload", o->workload, "shared, chat or both")
      ->capture_default_str()
      ->check(CLI::IsMember({"shared", "chat", "both"}));
  cmd->add_option("--requests", o->requests, "shared: requests submitted at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--system-tokens", o->system_tokens, "shared: system prompt tokens")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--question-tokens", o->question_tokens, "shared: question tokens")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--gen-tokens", o->gen_tokens, "shared: tokens generated per request")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--conversations", o->conversations, "chat: conversations at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--turns", o->turns, "chat: turns per conversation")
      ->capture_default_str()
      ->check(CLI::Range(2, 1000));
  cmd->add_option("--turn-tokens", o->turn_tokens, "chat: user tokens per turn")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--turn-gen-tokens", o->turn_gen_tokens, "chat: tokens generated per turn")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  cmd->callback([o] {
    int code = run_bench_prefix(*o);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace drift::cli
