// drift: LLM inference and serving engine. `drift <command> --help` for each command.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "commands.h"
#include "util/log.h"

int main(int argc, char** argv) {
  CLI::App app{"drift: LLM inference and serving engine for GGUF models"};
  app.require_subcommand(1);
  // Options of the program (--log-level) may also follow the command: `drift serve --log-level
  // debug`.
  app.fallthrough();
  app.set_version_flag("--version", std::string("drift ") + DRIFT_VERSION);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();
  app.parse_complete_callback([&] {
    drift::Status status = drift::init_logging(log_level);
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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return 0;
}
