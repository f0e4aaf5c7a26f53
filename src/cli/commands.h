// The subcommands of the `drift` program. Each registers its options on a CLI11 app and runs
// when selected; run functions return the process exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace drift::cli {

void register_batched_bench(CLI::App& app);
void register_bench(CLI::App& app);
void register_chat(CLI::App& app);
void register_bench_prefix(CLI::App& app);
void register_generate(CLI::App& app);
void register_inspect(CLI::App& app);
void register_list(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_pull(CLI::App& app);
void register_serve(CLI::App& app);
void register_tokenize(CLI::App& app);

}  // namespace drift::cli
