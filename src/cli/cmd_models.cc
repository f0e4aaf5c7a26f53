// `drift pull [NAME...]` fetches registered models into the cache (the default model without a
// name; `all` for every one) and verifies their sha256; `drift list` shows the registry's models
// and what the cache holds, with sizes.
#include <fmt/format.h>

#include <filesystem>
#include <set>

#include "commands.h"
#include "download_progress.h"
#include "model_locator.h"
#include "model_pull.h"
#include "model_registry.h"

namespace drift::cli {

namespace {

namespace fs = std::filesystem;

int fail(const std::string& message) {
  fmt::print(stderr, "error: {}\n", message);
  return 1;
}

int run_pull(const std::vector<std::string>& names) {
  Expected<ModelRegistry> registry = load_model_registry(model_registry_path());
  if (!registry.ok()) return fail(registry.error().message);
  std::vector<const RegisteredModel*> wanted;
  if (names.empty()) wanted.push_back(registry->find(registry->default_name));
  for (const std::string& name : names) {
    if (name == "all") {
      for (const RegisteredModel& m : registry->models) wanted.push_back(&m);
      continue;
    }
    const RegisteredModel* m = registry->find(name);
    if (m == nullptr)
      return fail(fmt::format("no model named '{}' (`drift list` shows the names)", name));
    wanted.push_back(m);
  }
  for (const RegisteredModel* m : wanted) {
    Expected<std::string> path = pull_model(*m, model_cache_dir(), model_index_url());
    if (!path.ok()) return fail(path.error().message);
    fmt::print("{}\t{}\n", m->name, *path);  // stdout: what scripts use
  }
  return 0;
}

int run_list() {
  Expected<ModelRegistry> registry = load_model_registry(model_registry_path());
  if (!registry.ok()) return fail(registry.error().message);
  const std::string cache = model_cache_dir();
  fmt::print("{:<30} {:>9}  {:<10} {}\n", "NAME", "SIZE", "CACHED", "FILE");
  std::set<std::string> registered_files;
  for (const RegisteredModel& m : registry->models) {
    registered_files.insert(m.file);
    const std::string path = cached_model_path(m, cache);
    std::error_code ec;
    const bool cached = fs::exists(path, ec);
    const std::string name = m.name == registry->default_name ? m.name + " *" : m.name;
    fmt::print("{:<30} {:>9}  {:<10} {}\n", name,
               format_bytes(cached ? fs::file_size(path, ec) : m.size), cached ? "yes" : "no",
               cached ? path : m.file);
  }
  // GGUF files the cache holds under no registered name (copied there by hand): -m PATH uses them.
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(cache, ec)) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() != ".gguf" || registered_files.count(file) > 0) continue;
    fmt::print("{:<30} {:>9}  {:<10} {}\n", "-", format_bytes(entry.file_size(ec)), "yes",
               entry.path().string());
  }
  fmt::print(stderr, "* the default model; cache {}; registry {}\n", cache, registry->path);
  return 0;
}

}  // namespace

void register_pull(CLI::App& app) {
  auto names = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "pull", "fetch models by name into the cache and check their sha256 (`drift list`)");
  cmd->add_option("names", *names, "model names, or `all` (default: the default model)");
  cmd->callback([names] {
    if (int code = run_pull(*names); code != 0) throw CLI::RuntimeError(code);
  });
}

void register_list(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("list", "the models drift knows by name, and the cache's");
  cmd->callback([] {
    if (int code = run_list(); code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace drift::cli
