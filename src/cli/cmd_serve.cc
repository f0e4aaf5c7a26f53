// `drift serve -m MODEL --host 127.0.0.1 --port 8080 [--api-key KEY] [--served-model-name NAME]
// [--chat-template FILE] [--no-webui] [engine options]`: the OpenAI-compatible HTTP server, and
// its web page (chat at /, live engine view at /engine) unless --no-webui.
//
// Every option also comes from DRIFT_<NAME> or a TOML file (`--config FILE`), flag > env > file >
// default (option_layers.h); `--print-config` prints the effective values and their sources.
//
// Threads: this one runs the I/O loop (every connection); the model loads on a helper thread
// while /health already answers 503 "loading"; the engine has its worker and compute threads.
// SIGTERM/SIGINT drain: /health and new requests answer 503 "draining", requests still queued
// (no token yet) are refused at once with 503 so their clients can retry elsewhere, started ones
// finish (up to --drain-timeout, then they are cancelled), their responses are written, exit 0;
// the log says how many requests and tokens the shutdown cut. A second signal exits at once (1).
// An engine that fails for good (its executor cannot run another step) has ended every request
// with an error; /health and new requests answer 503 "unhealthy" for --unhealthy-exit-delay
// seconds, so health checks see why, then the process exits 3 for its supervisor to restart it.
#include <fmt/format.h>
#include <sys/resource.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <utility>  // before Asio: Boost 1.74 uses std::exchange without including it

#include "commands.h"
#include "engine/engine.h"
#include "engine_flags.h"
#include "model_card.h"
#include "model_locator.h"
#include "option_layers.h"
#include "runtime/load_engine.h"
#include "sampling_options.h"
#include "server/http_server.h"
#include "server/openai_service.h"
#include "util/log.h"

namespace drift::cli {
namespace {

// ", each of 3 layers in 6 KV groups (1 full attention, 5 sliding over 512)" for a layout with
// sliding groups; empty for one group.
std::string describe_kv_groups(const KVLayout& layout) {
  if (!layout.has_sliding_groups()) return {};
  int32_t sliding = 0;
  std::string windows;
  for (int32_t g = 0; g < layout.num_groups(); ++g) {
    const KVGroup kind = layout.group(g);
    if (!kind.sliding()) continue;
    ++sliding;
    const std::string w = std::to_string(kind.sliding_window);
    if (windows.find(w) == std::string::npos) windows += (windows.empty() ? "" : "/") + w;
  }
  return fmt::format(", each of {} layers in {} KV groups ({} full attention, {} sliding over {})",
                     layout.num_layers, layout.num_groups(), layout.num_groups() - sliding, sliding,
                     windows);
}

namespace asio = boost::asio;

// The exit status after the engine failed for good (1 is a start-up error or a forced exit).
constexpr int kExitEngineFailed = 3;

struct ServeOptions {
  std::optional<std::string> model;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::optional<std::string> api_key;
  std::optional<std::string> api_key_file;
  std::optional<std::string> config_file;
  bool print_config = false;
  std::optional<std::string> served_model_name;
  bool no_webui = false;
  std::optional<std::string> chat_template_file;
  uint64_t max_body_bytes = 8u << 20;
  int64_t max_connections = 1024;
  int64_t max_connections_per_client = 512;
  double header_timeout_seconds = 10;
  double idle_timeout_seconds = 60;
  double body_timeout_seconds = 60;
  double drain_timeout_seconds = 30;
  double unhealthy_exit_delay_seconds = 5;
  std::optional<int64_t> debug_fail_at_step;  // fault injection: the executor fails at step K
  std::string pooling = "mean";               // /v1/embeddings: mean, last or cls
  // The Responses API's store of responses (server/response_store.h).
  int64_t responses_max_count = 10000;
  int64_t responses_max_mib = 256;
  double responses_ttl_seconds = 24 * 3600;
  EngineOptions engine;      // --threads, --parallel, --ctx-size, --kv-mib, --max-queued, ...
  SamplingOptions sampling;  // the server's defaults: --temp, --top-k, ..., --sampling-defaults
};

// Sockets are file descriptors: let the process use as many as it may.
void raise_fd_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

Expected<std::string> read_text_file(const std::string& path, std::string_view option) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read {} file '{}'", option, path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Everything that reads the model file, on the loader thread.
Expected<std::shared_ptr<server::LoadedModel>> load_model(const std::string& path,
                                                          const ServeOptions& o) {
  DRIFT_ASSIGN_OR_RETURN(EngineConfig config, to_engine_config(o.engine));
  DRIFT_RETURN_IF_ERROR(apply_sampling_defaults(o.sampling, config));
  ModelLoadOptions load;
  if (o.chat_template_file) {
    DRIFT_ASSIGN_OR_RETURN(std::string source,
                           read_text_file(*o.chat_template_file, "--chat-template"));
    load.chat_template = std::move(source);
  }
  ExecutorOptions executor;
  executor.debug_fail_at_step = o.debug_fail_at_step;
  DRIFT_ASSIGN_OR_RETURN(server::ModelCard card, read_model_card(path, load.chat_template));
  DRIFT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                         load_engine(path, config, load, executor, o.engine.kv_events));
  return std::make_shared<server::LoadedModel>(
      server::LoadedModel{std::move(engine), std::move(card)});
}

server::ResponseStoreLimits response_store_limits(const ServeOptions& o) {
  return {.max_count = size_t(o.responses_max_count),
          .max_bytes = size_t(o.responses_max_mib) << 20,
          .ttl = std::chrono::seconds(int64_t(o.responses_ttl_seconds))};
}

server::HttpServerConfig http_config(const ServeOptions& o) {
  server::HttpServerConfig http;
  http.host = o.host;
  http.port = uint16_t(o.port);
  http.max_body_bytes = o.max_body_bytes;
  http.max_connections = o.max_connections;
  http.max_connections_per_client = o.max_connections_per_client;
  auto ms = [](double seconds) { return std::chrono::milliseconds(int64_t(seconds * 1e3)); };
  http.header_timeout = ms(o.header_timeout_seconds);
  http.idle_timeout = ms(o.idle_timeout_seconds);
  http.body_timeout = ms(o.body_timeout_seconds);
  return http;
}

int fail(const std::string& message) {
  fmt::print(stderr, "error: {}\n", message);
  return 1;
}

// What the engine was set up with, once the model is loaded.
void log_ready(const EngineSetup& s) {
  log_event(spdlog::level::info, "ready",
            {{"context_tokens", int64_t(s.max_model_len)},
             {"context_bound", context_bound_name(s.max_model_len_bound)},
             {"kv_tokens", s.kv_tokens},
             {"kv_pages", int64_t(s.num_kv_pages)},
             {"kv_groups", int64_t(s.kv_layout.num_groups())},
             {"max_sequences", int64_t(s.scheduler.max_num_seqs)},
             {"threads", int64_t(s.threads)},
             {"default_max_tokens", int64_t(s.default_max_tokens.value_or(0))}},
            fmt::format(
                "drift serve: ready: context {} tokens ({}), {} KV pages of {} tokens{} ({} tokens "
                "of one sequence, {} KV cache, {:.1f} MiB), up to {} sequences, queue limit {}, {} "
                "threads; max_tokens default {}; sampling defaults ({}): {}",
                s.max_model_len, context_bound_name(s.max_model_len_bound), s.num_kv_pages,
                s.kv_layout.page_size, describe_kv_groups(s.kv_layout), s.kv_tokens,
                kv_dtype_name(s.kv_layout.dtype),
                double(s.num_kv_pages) * double(s.kv_layout.bytes_per_page()) / 1048576.0,
                s.scheduler.max_num_seqs, s.max_queued_requests, s.threads,
                s.default_max_tokens ? std::to_string(*s.default_max_tokens)
                                     : std::string("until a stop or the end of the context"),
                sampling_defaults_base_name(s.sampling.base), s.sampling.describe()));
  auto ms = [](const std::optional<double>& seconds) {
    return seconds ? fmt::format("{:g} ms", *seconds * 1e3) : std::string("off");
  };
  spdlog::info(
      "drift serve: latency targets: inter-token {}, first token {}, refuse above "
      "predicted first token {}",
      ms(s.latency.target_itl_seconds), ms(s.latency.target_ttft_seconds),
      ms(s.latency.max_ttft_seconds));
}

// One run of the server: the I/O loop and what its handlers share. Every handler runs on the
// loop's thread; the model loads, and the engine drains and aborts, on threads of their own.
class ServeRun {
 public:
  ServeRun(const ServeOptions& o, std::string path, std::string name)
      : o_(o),
        path_(std::move(path)),
        name_(std::move(name)),
        service_(io_, {.served_model_name = name_,
                       .api_key = o.api_key,
                       .pooling = *parse_pooling_mode(o.pooling),
                       .web_ui = !o.no_webui,
                       .responses = response_store_limits(o)}),
        server_(io_, http_config(o), [this](server::HttpRequest r, auto exchange) {
          service_.handle(std::move(r), std::move(exchange));
        }) {}

  // Listens, loads the model and serves until a drain or a failure stops the loop; the exit
  // code.
  int run() {
    service_.set_http_counters([this] { return server_.counters(); });
    if (Status s = server_.listen(); !s.ok()) return fail(s.message());
    log_event(spdlog::level::info, "listening",
              {{"host", o_.host},
               {"port", int64_t(server_.port())},
               {"model", name_},
               {"model_path", path_}},
              fmt::format("drift serve: listening on http://{}:{} (model '{}' loading from {})",
                          o_.host, server_.port(), name_, path_));
    wait_for_signal();
    start_loading();
    io_.run();
    loader_.join();
    if (drainer_.joinable()) drainer_.join();
    if (aborter_.joinable()) aborter_.join();
    if (model_) model_->engine->shutdown(ShutdownMode::kAbort);
    if (exit_code_ == 0) log_stopped();
    return exit_code_;
  }

 private:
  // The step cost model, logged every 30 s while steps run (the latency targets use it).
  void log_step_costs() {
    cost_log_.expires_after(std::chrono::seconds(30));
    cost_log_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || stopping_ || !model_) return;
      const EngineMetrics m = model_->engine->metrics();
      if (m.step_costs_calibrated && m.steps != steps_logged_) {
        steps_logged_ = m.steps;
        spdlog::info(
            "drift serve: step cost ({} threads): {:.2f} ms per step + {:.3f} ms per prefill "
            "token + {:.3f} ms per decode sequence + {:.2f} ns per attended position; last "
            "step {:.1f} ms (predicted {:.1f} ms), prefill budget {} tokens",
            m.threads, m.step_costs.per_step * 1e3, m.step_costs.per_prefill_token * 1e3,
            m.step_costs.per_decode_sequence * 1e3, m.step_costs.per_attended_position * 1e9,
            m.last_step_seconds * 1e3, m.last_step_predicted_seconds * 1e3, m.prefill_token_budget);
      }
      log_step_costs();
    });
  }

  // After a drain: waits for the last responses to be written, then stops the loop.
  void wait_for_responses() {
    if ((service_.active_generations() == 0 && server_.busy_connections() == 0) ||
        std::chrono::steady_clock::now() > give_up_) {
      io_.stop();
      return;
    }
    poll_.expires_after(std::chrono::milliseconds(20));
    poll_.async_wait([this](const boost::system::error_code&) { wait_for_responses(); });
  }

  // Drain: refuse new work, let the engine finish what it accepted, then wait for the last
  // responses to be written before the loop stops.
  void begin_drain() {
    if (stopping_) return;
    stopping_ = true;
    if (model_) {
      const EngineMetrics m = model_->engine->metrics();
      spdlog::info(
          "drift serve: draining (up to {} s; a second signal exits at once): {} requests "
          "running, {} queued (refused now)",
          o_.drain_timeout_seconds, m.num_running, m.num_waiting);
    } else {
      spdlog::info("drift serve: stopping while the model loads");
    }
    server_.drain();
    service_.set_draining();
    cost_log_.cancel();
    if (!model_) return;  // still loading: the loader stops the loop when it is done
    drain_deadline_.expires_after(
        std::chrono::milliseconds(int64_t(o_.drain_timeout_seconds * 1e3)));
    drain_deadline_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      spdlog::warn("drift serve: drain timeout; cancelling the remaining requests");
      aborter_ = std::thread([this] { model_->engine->shutdown(ShutdownMode::kAbort); });
    });
    drainer_ = std::thread([this] {
      model_->engine->shutdown(ShutdownMode::kDrainStarted);
      asio::post(io_, [this] {
        drain_deadline_.cancel();
        give_up_ = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        wait_for_responses();
      });
    });
  }

  // A failed engine cannot recover in this process: say why on /health for a while (every
  // request already ended with an error, new ones are refused), then exit for a restart.
  void watch_health() {
    health_watch_.expires_after(std::chrono::milliseconds(100));
    health_watch_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || stopping_) return;
      if (model_->engine->healthy()) return watch_health();
      stopping_ = true;
      exit_code_ = kExitEngineFailed;
      spdlog::error(
          "drift serve: the engine failed and ended every request with an error; /health "
          "answers 503 for {} s, then the process exits {} (restart it)",
          o_.unhealthy_exit_delay_seconds, kExitEngineFailed);
      server_.drain();
      cost_log_.cancel();
      drain_deadline_.expires_after(
          std::chrono::milliseconds(int64_t(o_.unhealthy_exit_delay_seconds * 1e3)));
      drain_deadline_.async_wait([this](const boost::system::error_code& ec) {
        if (ec) return;
        give_up_ = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        wait_for_responses();
      });
    });
  }

  void wait_for_signal() {
    signals_.async_wait([this](const boost::system::error_code& ec, int signal_number) {
      if (ec) return;
      if (stopping_) {
        // The operator does not want to wait for the drain.
        spdlog::warn("drift serve: second signal ({}): exiting now, cutting {} requests",
                     signal_number, service_.active_generations());
        spdlog::default_logger()->flush();
        std::_Exit(1);
      }
      begin_drain();
      wait_for_signal();
    });
  }

  // Loads the model on the loader thread; the loop learns of it in on_loaded.
  void start_loading() {
    loader_ = std::thread([this] {
      auto loaded = load_model(path_, o_);
      asio::post(io_,
                 [this, loaded = std::move(loaded)]() mutable { on_loaded(std::move(loaded)); });
    });
  }

  void on_loaded(Expected<std::shared_ptr<server::LoadedModel>> loaded) {
    if (!loaded.ok()) {
      spdlog::error("drift serve: {}", loaded.error().message);
      exit_code_ = 1;
      io_.stop();
      return;
    }
    model_ = std::move(*loaded);
    if (stopping_) {
      io_.stop();
      return;
    }
    service_.set_ready(model_);
    log_ready(model_->engine->setup());
    log_step_costs();
    watch_health();
  }

  void log_stopped() {
    const server::OpenAIService::CutSummary cut = service_.cut_by_shutdown();
    log_event(spdlog::level::info, "stopped",
              {{"cut_requests", int64_t(cut.requests)},
               {"cut_before_first_token", int64_t(cut.before_first_token)},
               {"cut_tokens", int64_t(cut.tokens)}},
              fmt::format("drift serve: stopped; the shutdown cut {} requests ({} of them before "
                          "their first token), which had generated {} tokens",
                          cut.requests, cut.before_first_token, cut.tokens));
  }

  const ServeOptions& o_;
  const std::string path_;
  const std::string name_;
  asio::io_context io_{1};
  server::OpenAIService service_;
  server::HttpServer server_;
  std::shared_ptr<server::LoadedModel> model_;
  int exit_code_ = 0;
  bool stopping_ = false;
  asio::signal_set signals_{io_, SIGINT, SIGTERM};
  asio::steady_timer drain_deadline_{io_}, poll_{io_}, cost_log_{io_}, health_watch_{io_};
  std::thread loader_, drainer_, aborter_;
  uint64_t steps_logged_ = 0;
  std::chrono::steady_clock::time_point give_up_;
};

// Resolves the model, then serves it (ServeRun).
int serve(const ServeOptions& o) {
  auto path = resolve_model_path(o.model);
  if (!path.ok()) return fail(path.error().message);
  raise_fd_limit();
  std::signal(SIGPIPE, SIG_IGN);
  const std::string name = o.served_model_name.value_or(std::filesystem::path(*path).stem());
  return ServeRun(o, *path, name).run();
}

}  // namespace

// The key of --api-key-file: the file's first line without surrounding white space.
Expected<std::string> read_api_key_file(const std::string& path) {
  DRIFT_ASSIGN_OR_RETURN(std::string text, read_text_file(path, "--api-key-file"));
  const size_t end_of_line = text.find_first_of("\r\n");
  std::string key = text.substr(0, end_of_line);
  const size_t first = key.find_first_not_of(" \t");
  const size_t last = key.find_last_not_of(" \t");
  if (first == std::string::npos)
    return make_error("--api-key-file '{}': the first line is empty", path);
  return key.substr(first, last - first + 1);
}

// The options the environment and the config file may set: all of serve's but --config and
// --print-config, and the program's --log-level and --log-format.
std::vector<CLI::Option*> layered_options(CLI::App& cmd) {
  std::vector<CLI::Option*> options;
  for (CLI::Option* option : cmd.get_options()) {
    const std::string name = option->get_single_name();
    if (name != "help" && name != "config" && name != "print-config") options.push_back(option);
  }
  for (const char* name : {"--log-level", "--log-format"})
    options.push_back(cmd.get_parent()->get_option(name));
  return options;
}

// Applies the environment and the config file, reads the API key file and starts logging in
// the chosen format. Returns false (after printing why) if serve must not start.
Expected<std::vector<OptionOrigin>> complete_options(CLI::App& cmd, ServeOptions& o) {
  if (!o.config_file) {
    if (const char* path = std::getenv("DRIFT_CONFIG"); path != nullptr && *path != '\0')
      o.config_file = path;
  }
  DRIFT_ASSIGN_OR_RETURN(std::vector<OptionOrigin> origins,
                         apply_option_layers(layered_options(cmd), o.config_file));
  if (o.api_key_file) {
    if (o.api_key) return make_error("give --api-key or --api-key-file, not both");
    DRIFT_ASSIGN_OR_RETURN(std::string key, read_api_key_file(*o.api_key_file));
    o.api_key = std::move(key);
  }
  CLI::App& program = *cmd.get_parent();
  const std::string level = program.get_option("--log-level")->as<std::string>();
  const std::string format_name = program.get_option("--log-format")->as<std::string>();
  const std::optional<LogFormat> format = parse_log_format(format_name);
  if (!format) return make_error("--log-format: expected text or json, got '{}'", format_name);
  DRIFT_RETURN_IF_ERROR(init_logging(level, *format));
  return origins;
}

namespace {

// The HTTP server's limits: body size, connections, timeouts, the exit delay once unhealthy.
void add_connection_options(CLI::App& cmd, ServeOptions& o) {
  cmd.add_option("--max-body-bytes", o.max_body_bytes, "largest request body (413 above)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1024}, uint64_t{1} << 32));
  cmd.add_option("--max-connections", o.max_connections, "open connections at most")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd.add_option("--max-connections-per-client", o.max_connections_per_client,
                 "open connections of one client IP address at most (429 above)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd.add_option("--header-timeout", o.header_timeout_seconds,
                 "seconds a connection has to send a request header (a new one: from connect)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  cmd.add_option("--idle-timeout", o.idle_timeout_seconds,
                 "seconds a kept-alive connection may wait for its next request")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  cmd.add_option("--body-timeout", o.body_timeout_seconds,
                 "seconds a request body may take to arrive after its header")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  cmd.add_option("--drain-timeout", o.drain_timeout_seconds,
                 "seconds SIGTERM waits for requests in flight")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  cmd.add_option("--unhealthy-exit-delay", o.unhealthy_exit_delay_seconds,
                 "seconds /health answers 503 after the engine failed, before the process exits "
                 "3")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
}

// Fault injection, KV events, embeddings' pooling and the stored Responses.
void add_serving_options(CLI::App& cmd, ServeOptions& o) {
  cmd.add_option("--debug-fail-at-step", o.debug_fail_at_step,
                 "fault injection: the executor fails for good at this step, as a kernel fault "
                 "would (to test clients and supervisors)")
      ->group("Debugging")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 62));
  cmd.add_option("--kv-events-endpoint", o.engine.kv_events.endpoint,
                 "publish vLLM's KV cache events (ZeroMQ PUB, msgpack) for KV-aware routers: "
                 "tcp://*:5557 binds, tcp://HOST:PORT connects to a router that binds")
      ->group("Scale-out");
  cmd.add_option("--kv-events-topic", o.engine.kv_events.topic,
                 "topic frame of every KV event message (default: empty)")
      ->group("Scale-out");
  cmd.add_option("--pooling", o.pooling,
                 "how /v1/embeddings pools the final hidden states: mean, last or cls "
                 "(then L2-normalised)")
      ->capture_default_str()
      ->check(CLI::IsMember({"mean", "last", "cls"}));
  cmd.add_option("--responses-max-count", o.responses_max_count,
                 "responses /v1/responses keeps for previous_response_id and GET (oldest "
                 "evicted first; 0 keeps none)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cmd.add_option("--responses-max-mib", o.responses_max_mib,
                 "MiB of stored responses at most (oldest evicted first)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd.add_option("--responses-ttl", o.responses_ttl_seconds, "seconds a stored response is kept")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 365.0 * 24 * 3600));
}

}  // namespace

void register_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  cmd->footer(
      "Every option can also be set by the environment, DRIFT_ and its name in capitals "
      "(DRIFT_PORT, DRIFT_API_KEY, DRIFT_CTX_SIZE, ...), or in the TOML file of --config "
      "(port = 8081); a flag wins over the environment, which wins over the file.");
  cmd->add_option("--config", o->config_file,
                  "TOML file of option values, keys named as the options (default: $DRIFT_CONFIG)");
  cmd->add_flag("--print-config", o->print_config,
                "print the effective options and where each came from, then exit");
  cmd->add_option("-m,--model", o->model, "GGUF file (default: the cached default model)");
  cmd->add_option("--host", o->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", o->port, "port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", o->api_key, "require 'Authorization: Bearer KEY' (not on /health)");
  cmd->add_flag("--no-webui", o->no_webui,
                "no web page (chat at /, live engine view at /engine); the API stays");
  cmd->add_option("--api-key-file", o->api_key_file,
                  "read the API key from the first line of this file (keeps it out of process "
                  "listings)");
  cmd->add_option("--served-model-name", o->served_model_name,
                  "model name clients use (default: the file name without .gguf)");
  cmd->add_option("--chat-template", o->chat_template_file,
                  "Jinja chat template file, instead of the GGUF's");
  add_connection_options(*cmd, *o);
  add_serving_options(*cmd, *o);
  register_sampling_default_options(*cmd, o->sampling);
  register_engine_options(*cmd, o->engine);
  cmd->add_option("--default-max-tokens", o->engine.default_max_tokens,
                  "max_tokens of a request that gives none (default: until a stop or the end of "
                  "the context)")
      ->check(CLI::Range(1, 1 << 24));
  cmd->callback([o, cmd] {
    Expected<std::vector<OptionOrigin>> origins = complete_options(*cmd, *o);
    if (!origins.ok()) {
      fmt::print(stderr, "error: {}\n", origins.error().message);
      throw CLI::RuntimeError(2);
    }
    // Every value is checked before it is printed or a model loads: a bad one in a file or the
    // environment fails here, as a bad flag does, not minutes later.
    if (Expected<EngineConfig> config = to_engine_config(o->engine); !config.ok()) {
      fmt::print(stderr, "error: {}\n", config.error().message);
      throw CLI::RuntimeError(2);
    }
    if (o->print_config) {
      fmt::print("{}", describe_option_origins(*origins, {"api-key"}));
      return;
    }
    int code = serve(*o);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace drift::cli
