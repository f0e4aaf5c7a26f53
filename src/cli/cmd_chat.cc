// `drift chat -m MODEL`: a conversation in the terminal. Each line read from stdin is a user
// turn; the whole conversation goes to the engine, which renders it with the model's chat
// template (--chat-template FILE overrides it; ChatML when the model has none) and tokenizes it
// so that what the user types never becomes control tokens; the reply streams to stdout. Commands:
// /reset starts over, /exit (or end of input) quits. At start it says (on stderr) which sampling
// settings are in force and where each came from; --stats prints each reply's token count, time
// to first token and decode speed after it (stderr too, so stdout is the conversation).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "engine/engine.h"
#include "engine_flags.h"
#include "model_locator.h"
#include "runtime/load_engine.h"
#include "sampling_options.h"

namespace drift::cli {
namespace {

struct ChatOptions {
  std::optional<std::string> model;
  std::optional<std::string> chat_template_file;
  std::optional<std::string> system;
  std::optional<int32_t> max_tokens;
  bool stats = false;
  SamplingOptions sampling;
  EngineOptions engine;
};

int fail(const Error& e) {
  fmt::print(stderr, "error: {}\n", e.message);
  return 1;
}

Expected<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot open --chat-template file {}", path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// "-- 42 tokens, TTFT 85 ms, 31.2 tokens/s": decode speed over the tokens after the first.
void print_stats(const Finish& finish) {
  const RequestTimings& t = finish.timings;
  const int32_t tokens = finish.usage.completion_tokens;
  std::string ttft = t.time_to_first_token_seconds
                         ? fmt::format("{:.0f} ms", *t.time_to_first_token_seconds * 1e3)
                         : std::string("n/a");
  std::string speed = "n/a";
  if (t.time_to_first_token_seconds && tokens > 1 &&
      t.end_to_end_seconds > *t.time_to_first_token_seconds)
    speed = fmt::format("{:.1f}",
                        (tokens - 1) / (t.end_to_end_seconds - *t.time_to_first_token_seconds));
  fmt::print(stderr, "-- {} tokens, TTFT {}, {} tokens/s\n", tokens, ttft, speed);
}

int run_chat(ChatOptions o) {
  const SamplingSettings sampling = request_sampling(o.sampling);
  auto path = resolve_model_path(o.model);
  if (!path.ok()) return fail(path.error());
  ModelLoadOptions load;
  if (o.chat_template_file) {
    auto text = read_file(*o.chat_template_file);
    if (!text.ok()) return fail(text.error());
    load.chat_template = std::move(*text);
  }
  auto config = to_engine_config(o.engine);
  if (!config.ok()) return fail(config.error());
  if (Status s = apply_sampling_defaults(o.sampling, *config); !s.ok()) return fail(s.error());
  auto engine = load_engine(*path, *config, load);
  if (!engine.ok()) return fail(engine.error());
  fmt::print(stderr, "sampling: {}, seed {}\n", (*engine)->setup().sampling.describe(),
             *sampling.seed);

  std::vector<ChatMessage> conversation;
  if (o.system) conversation.push_back({"system", *o.system});
  const size_t preamble = conversation.size();
  std::string line;
  while (true) {
    fmt::print("> ");
    std::fflush(stdout);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      conversation.erase(conversation.begin() + static_cast<std::ptrdiff_t>(preamble),
                         conversation.end());
      continue;
    }
    if (line.empty()) continue;
    conversation.push_back({"user", line});
    Request request;
    request.prompt = ChatPrompt{conversation};
    request.max_tokens = o.max_tokens;
    request.sampling = sampling;
    RequestHandle handle = (*engine)->submit(std::move(request));
    std::string reply;
    std::optional<Finish> finish;
    while (std::optional<TokenEvent> event = handle.next()) {
      fmt::print("{}", event->text);
      std::fflush(stdout);
      reply += event->text;
      if (event->finish) finish = event->finish;
    }
    fmt::print("\n");
    std::fflush(stdout);  // the reply before its stats (stderr)
    if (o.stats) print_stats(*finish);
    if (finish->reason == FinishReason::kError || finish->reason == FinishReason::kRejected) {
      // The turn is dropped so that the conversation stays one the model can continue.
      fmt::print(stderr, "error: {}\n", finish->message);
      conversation.erase(conversation.end() - 1);
      continue;
    }
    conversation.push_back({"assistant", reply});
  }
  (*engine)->shutdown(ShutdownMode::kDrain);
  return 0;
}

}  // namespace

void register_chat(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  o->engine.parallel = 1;
  CLI::App* cmd = app.add_subcommand("chat", "Talk with a chat model in the terminal");
  cmd->add_option("-m,--model", o->model, "GGUF file (default: the cached default model)");
  cmd->add_option("--chat-template", o->chat_template_file,
                  "Jinja template file replacing the model's");
  cmd->add_option("--system", o->system, "system message that starts the conversation");
  cmd->add_option(
         "-n,--n-predict", o->max_tokens,
         "tokens per reply at most (default: until the model stops or the context is full)")
      ->check(CLI::Range(1, 1 << 24));
  cmd->add_flag("--stats", o->stats, "after each reply, print tokens, TTFT and tokens/s");
  register_sampling_options(*cmd, o->sampling);
  register_engine_options(*cmd, o->engine);
  cmd->callback([o] {
    int code = run_chat(*o);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace drift::cli
