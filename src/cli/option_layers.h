// Where an option of a command gets its value, in this order: the command line, the environment
// (DRIFT_ and the long name in capitals, `--ctx-size` -> DRIFT_CTX_SIZE), a TOML config file
// (`ctx-size = 8192` or `ctx_size = 8192`), the default. CLI11 reads config files and
// environment variables itself, but applies the file before the environment; the precedence
// operators expect (flag > env > file) and the record of where each value came from
// (`drift serve --print-config`) need the layers applied here, after CLI11 parsed the flags.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "util/error.h"

namespace drift::cli {

enum class OptionSource { kDefault, kFlag, kEnvironment, kFile };

struct OptionOrigin {
  CLI::Option* option = nullptr;
  OptionSource source = OptionSource::kDefault;
  std::string where;  // the environment variable or the config file
};

// DRIFT_ and the option's long name in capitals, dashes as underscores.
std::string environment_name(const CLI::Option& option);

// The environment, then `config_file` (when given), for every option of `options` that the
// command line left unset; each value goes through the option's own checks, and an error names
// the variable or the file and key. Keys of the file that name no option are errors (a typo
// must not pass silently).
Expected<std::vector<OptionOrigin>> apply_option_layers(
    const std::vector<CLI::Option*>& options, const std::optional<std::string>& config_file);

// The effective values as a TOML file that reproduces them, each line commented with its
// source: `port = 8081  # env DRIFT_PORT`. Options named in `secrets` show "(hidden)".
std::string describe_option_origins(const std::vector<OptionOrigin>& origins,
                                    const std::vector<std::string>& secrets);

}  // namespace drift::cli
