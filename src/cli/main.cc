// drift: LLM inference and serving engine. `drift <command> --help` for each command.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "build_info.h"
#include "commands.h"
#include "option_layers.h"
#include "util/log.h"
#include "util/signal_stack.h"

int main(int argc, char** argv) {
  drift::ensure_alternate_signal_stack();  // the main thread runs the server's I/O loop
  CLI::App app{"drift: LLM inference and serving engine for GGUF models"};
  app.require_subcommand(1);
  // Options of the program (--log-level) may also follow the command: `drift serve --log-level
  // debug`.
  app.fallthrough();
  app.set_version_flag("--version", drift::cli::version_text());
  std::string log_level = "info";
  std::string log_format = "text";
  CLI::Option* level_option =
      app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
          ->capture_default_str();
  CLI::Option* format_option =
      app.add_option("--log-format", log_format,
                     "text, or json: one JSON object per line (timestamp, level, event, fields)")
          ->capture_default_str()
          ->check(CLI::IsMember({"text", "json"}));
  app.parse_complete_callback([&] {
    // `serve` applies the environment and its config file to these too, then starts logging.
    if (app.got_subcommand("serve")) return;
    auto layered = drift::cli::apply_option_layers({level_option, format_option}, std::nullopt);
    if (!layered.ok())
      throw CLI::ValidationError("--log-level/--log-format", layered.error().message);
    drift::Status status = drift::init_logging(log_level, *drift::parse_log_format(log_format));
    if (!status.ok()) throw CLI::ValidationError("--log-level", status.message());
  });

  drift::cli::register_inspect(app);
  drift::cli::register_tokenize(app);
  drift::cli::register_generate(app);
  drift::cli::register_chat(app);
  drift::cli::register_perplexity(app);
  drift::cli::register_bench(app);
  drift::cli::register_batched_bench(app);
  drift::cli::register_bench_prefix(app);
  drift::cli::register_serve(app);
  drift::cli::register_pull(app);
  drift::cli::register_list(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}
