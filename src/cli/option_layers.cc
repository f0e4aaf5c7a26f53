#include "option_layers.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>

namespace drift::cli {

namespace {

std::string key_of(const CLI::Option& option) {
  std::string name = option.get_single_name();  // the long name without dashes when it has one
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

// A TOML scalar as the text CLI11 would have received on the command line.
Expected<std::string> scalar_text(const toml::node& node, const std::string& where) {
  if (auto v = node.value_exact<std::string>()) return *v;
  if (auto v = node.value_exact<int64_t>()) return std::to_string(*v);
  if (auto v = node.value_exact<double>()) return fmt::format("{}", *v);
  if (auto v = node.value_exact<bool>()) return std::string(*v ? "true" : "false");
  return make_error("{}: expected a string, number or boolean", where);
}

// Gives `option` the value `text` as if typed on the command line, through its validators.
Status set_from_text(CLI::Option& option, const std::string& text, const std::string& where) {
  try {
    option.add_result(text);
    option.run_callback();
  } catch (const CLI::Error& e) {
    option.clear();
    return make_error("{}: {}", where, e.what());
  }
  return Status::Ok();
}

// The file's keys, normalized (ctx_size -> ctx-size), with their values as text.
Expected<std::map<std::string, std::string>> read_config_file(const std::string& path) {
  // toml++ reads a directory or a device as an empty file, which would start the server with no
  // configuration at all: only a regular file of sane size is a config file.
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (ec) return make_error("config file '{}': {}", path, ec.message());
  if (!std::filesystem::is_regular_file(status))
    return make_error("config file '{}' is not a regular file", path);
  constexpr uintmax_t kMaxConfigBytes = 1 << 20;
  if (std::filesystem::file_size(path, ec) > kMaxConfigBytes || ec)
    return make_error("config file '{}' is larger than {} bytes", path, kMaxConfigBytes);
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    return make_error("config file '{}', line {}, column {}: {}", path, at.line, at.column,
                      e.description());
  }
  std::map<std::string, std::string> values;
  for (const auto& [raw_key, node] : table) {
    std::string key(raw_key.str());
    std::replace(key.begin(), key.end(), '_', '-');
    DRIFT_ASSIGN_OR_RETURN(std::string text,
                           scalar_text(node, fmt::format("config file '{}': {}", path, key)));
    values[key] = std::move(text);
  }
  return values;
}

bool looks_like_toml_scalar(const std::string& text) {
  if (text == "true" || text == "false") return true;
  char* end = nullptr;
  std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size() && !std::isalpha(text.back());
}

std::string toml_value(const std::string& text) {
  if (looks_like_toml_scalar(text)) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

}  // namespace

std::string environment_name(const CLI::Option& option) {
  std::string name = "DRIFT_" + key_of(option);
  for (char& c : name) c = c == '-' ? '_' : char(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

Expected<std::vector<OptionOrigin>> apply_option_layers(
    const std::vector<CLI::Option*>& options, const std::optional<std::string>& config_file) {
  std::map<std::string, std::string> file_values;
  if (config_file) {
    DRIFT_ASSIGN_OR_RETURN(file_values, read_config_file(*config_file));
    for (const auto& [key, value] : file_values) {
      const bool known = std::any_of(options.begin(), options.end(),
                                     [&](CLI::Option* o) { return key_of(*o) == key; });
      if (!known)
        return make_error(
            "config file '{}': unknown key '{}' (keys are option names: port, "
            "ctx-size, api-key-file, ...)",
            *config_file, key);
    }
  }
  std::vector<OptionOrigin> origins;
  for (CLI::Option* option : options) {
    OptionOrigin origin{option, OptionSource::kDefault, ""};
    const std::string env = environment_name(*option);
    if (option->count() > 0) {
      origin.source = OptionSource::kFlag;
    } else if (const char* value = std::getenv(env.c_str()); value != nullptr && *value != '\0') {
      DRIFT_RETURN_IF_ERROR(set_from_text(*option, value, fmt::format("{}='{}'", env, value)));
      origin = {option, OptionSource::kEnvironment, env};
    } else if (auto it = file_values.find(key_of(*option)); it != file_values.end()) {
      DRIFT_RETURN_IF_ERROR(set_from_text(
          *option, it->second, fmt::format("config file '{}': {}", *config_file, it->first)));
      origin = {option, OptionSource::kFile, *config_file};
    }
    origins.push_back(std::move(origin));
  }
  return origins;
}

std::string describe_option_origins(const std::vector<OptionOrigin>& origins,
                                    const std::vector<std::string>& secrets) {
  std::string out;
  for (const OptionOrigin& origin : origins) {
    const CLI::Option& option = *origin.option;
    const std::string key = key_of(option);
    std::string source;
    switch (origin.source) {
      case OptionSource::kDefault:
        source = "default";
        break;
      case OptionSource::kFlag:
        source = "flag";
        break;
      case OptionSource::kEnvironment:
        source = "env " + origin.where;
        break;
      case OptionSource::kFile:
        source = "file " + origin.where;
        break;
    }
    std::string value;
    if (option.count() > 0) {
      const std::vector<std::string>& results = option.results();
      value = results.back();
      // A flag given on the command line records no text; its presence means on.
      if (option.get_expected_min() == 0 && value.empty()) value = "true";
    } else if (option.get_expected_min() == 0) {
      value = "false";
    } else {
      value = option.get_default_str();
    }
    const bool secret = std::find(secrets.begin(), secrets.end(), key) != secrets.end();
    if (value.empty()) {
      out += fmt::format("# {} is unset  # {}\n", key, source);
    } else if (secret) {
      out += fmt::format("# {} = (hidden)  # {}\n", key, source);
    } else {
      out += fmt::format("{} = {}  # {}\n", key, toml_value(value), source);
    }
  }
  return out;
}

}  // namespace drift::cli
