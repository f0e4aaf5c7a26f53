#include "model_registry.h"

#include <toml++/toml.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace drift::cli {

namespace {

bool is_sha256_hex(std::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

Expected<std::string> required_string(const toml::table& table, std::string_view key,
                                      const std::string& where) {
  std::optional<std::string> value = table[key].value<std::string>();
  if (!value || value->empty())
    return make_error("{}: '{}' must be a non-empty string", where, key);
  return *value;
}

Expected<RegisteredModel> read_model(const std::string& name, const toml::table& table,
                                     const std::string& where) {
  RegisteredModel model;
  model.name = name;
  model.description = table["description"].value_or(std::string());
  DRIFT_ASSIGN_OR_RETURN(model.file, required_string(table, "file", where));
  if (model.file.find('/') != std::string::npos || model.file.starts_with("."))
    return make_error("{}: 'file' must be a plain file name, got '{}'", where, model.file);
  DRIFT_ASSIGN_OR_RETURN(model.sha256, required_string(table, "sha256", where));
  if (!is_sha256_hex(model.sha256))
    return make_error("{}: 'sha256' must be 64 lowercase hex digits", where);
  std::optional<int64_t> size = table["size"].value<int64_t>();
  if (!size || *size <= 0) return make_error("{}: 'size' must be a positive integer", where);
  model.size = uint64_t(*size);
  const toml::array* parts = table["parts"].as_array();
  if (parts == nullptr || parts->empty())
    return make_error("{}: 'parts' must be a non-empty array", where);
  for (size_t i = 0; i < parts->size(); ++i) {
    const toml::table* part = (*parts)[i].as_table();
    const std::string part_where = fmt::format("{}.parts[{}]", where, i);
    if (part == nullptr) return make_error("{}: expected a table", part_where);
    ModelPart p;
    DRIFT_ASSIGN_OR_RETURN(p.package, required_string(*part, "package", part_where));
    DRIFT_ASSIGN_OR_RETURN(p.version, required_string(*part, "version", part_where));
    DRIFT_ASSIGN_OR_RETURN(p.member, required_string(*part, "member", part_where));
    model.parts.push_back(std::move(p));
  }
  return model;
}

}  // namespace

const RegisteredModel* ModelRegistry::find(std::string_view name) const {
  for (const RegisteredModel& model : models)
    if (model.name == name) return &model;
  return nullptr;
}

std::string model_registry_path() {
  if (const char* path = std::getenv("DRIFT_MODEL_REGISTRY"); path != nullptr && *path != '\0')
    return path;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "share/drift/models.toml";
  return (exe.parent_path().parent_path() / "share" / "drift" / "models.toml").string();
}

Expected<ModelRegistry> load_model_registry(const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return make_error("model registry '{}': {} (line {})", path, e.description(),
                      e.source().begin.line);
  }
  ModelRegistry registry;
  registry.path = path;
  const toml::table* models = root["models"].as_table();
  if (models == nullptr || models->empty())
    return make_error("model registry '{}': no [models.\"NAME\"] tables", path);
  for (const auto& [key, node] : *models) {
    const std::string name(key.str());
    const toml::table* table = node.as_table();
    const std::string where = fmt::format("model registry '{}': models.\"{}\"", path, name);
    if (table == nullptr) return make_error("{}: expected a table", where);
    DRIFT_ASSIGN_OR_RETURN(RegisteredModel model, read_model(name, *table, where));
    registry.models.push_back(std::move(model));
  }
  registry.default_name = root["default"].value_or(std::string());
  if (registry.find(registry.default_name) == nullptr)
    return make_error("model registry '{}': default '{}' is not one of its models", path,
                      registry.default_name);
  return registry;
}

}  // namespace drift::cli
