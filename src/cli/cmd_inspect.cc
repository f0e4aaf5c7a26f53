// `drift inspect -m MODEL`: what a user checks first about a GGUF file — architecture,
// geometry, tensor formats, vocabulary, chat template, the sampling defaults the model gets and
// file size.
#include <fmt/format.h>

#include <map>
#include <optional>
#include <string>

#include "commands.h"
#include "engine/sampling_defaults.h"
#include "gguf/gguf_file.h"
#include "model/recommended_sampling.h"
#include "model_locator.h"

namespace drift::cli {
namespace {

struct InspectOptions {
  std::optional<std::string> model;
  bool list_tensors = false;
  bool list_metadata = false;
};

std::string human_bytes(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return fmt::format("{:.2f} GiB", bytes / double(1ull << 30));
  if (bytes >= (1ull << 20)) return fmt::format("{:.2f} MiB", bytes / double(1ull << 20));
  if (bytes >= (1ull << 10)) return fmt::format("{:.2f} KiB", bytes / double(1ull << 10));
  return fmt::format("{} B", bytes);
}

std::string value_or(const GgufFile& file, std::string_view key, std::string_view fallback) {
  const GgufValue* v = file.find(key);
  return v != nullptr ? v->to_display_string() : std::string(fallback);
}

void print_geometry(const GgufFile& file, std::string_view arch) {
  // Every "<arch>.*" key is geometry or hyper-parameters (block_count, embedding_length,
  // attention.head_count, rope.freq_base, ...): print them all rather than a fixed subset.
  std::string prefix = std::string(arch) + ".";
  fmt::print("geometry:\n");
  for (const GgufKeyValue& kv : file.metadata())
    if (kv.key.starts_with(prefix))
      fmt::print("  {:<40} {}\n", kv.key.substr(prefix.size()), kv.value.to_display_string());
}

void print_tensor_formats(const GgufFile& file) {
  struct Totals {
    uint64_t tensors = 0, elements = 0, bytes = 0;
  };
  std::map<std::string_view, Totals> by_type;
  uint64_t total_elements = 0, total_bytes = 0;
  for (const GgufTensor& t : file.tensors()) {
    Totals& totals = by_type[ggml_type_info(static_cast<uint32_t>(t.type))->name];
    totals.tensors += 1;
    totals.elements += t.n_elements;
    totals.bytes += t.n_bytes;
    total_elements += t.n_elements;
    total_bytes += t.n_bytes;
  }
  fmt::print("tensors: {} ({:.1f} M parameters, {}, {:.2f} bits per weight)\n",
             file.tensors().size(), total_elements / 1e6, human_bytes(total_bytes),
             total_elements ? 8.0 * total_bytes / total_elements : 0.0);
  for (const auto& [name, totals] : by_type)
    fmt::print("  {:<8} {:>4} tensors {:>10.2f} M weights {:>12}\n", name, totals.tensors,
               totals.elements / 1e6, human_bytes(totals.bytes));
}

void print_vocabulary(const GgufFile& file) {
  fmt::print("vocabulary:\n");
  fmt::print("  {:<40} {}\n", "model", value_or(file, "tokenizer.ggml.model", "(none)"));
  fmt::print("  {:<40} {}\n", "pre-tokenizer", value_or(file, "tokenizer.ggml.pre", "(none)"));
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  bool have_tokens = tokens != nullptr && tokens->type == GgufType::kArray &&
                     tokens->array.element_type == GgufType::kString;
  fmt::print("  {:<40} {}\n", "size",
             have_tokens ? fmt::format("{}", tokens->array.count) : "(none)");
  if (const GgufValue* merges = file.find("tokenizer.ggml.merges"))
    fmt::print("  {:<40} {}\n", "merges", merges->array.count);
  for (std::string_view role : {"bos", "eos", "eot", "unknown", "padding"}) {
    std::string key = fmt::format("tokenizer.ggml.{}_token_id", role);
    auto id = file.get_uint(key);
    if (!id.ok()) continue;
    std::string text = have_tokens && *id < tokens->array.count
                           ? fmt::format("'{}'", tokens->array.strings[*id])
                           : std::string("(out of range)");
    fmt::print("  {:<40} {} {}\n", std::string(role) + " token", *id, text);
  }
  for (std::string_view flag : {"add_bos_token", "add_eos_token", "add_space_prefix"}) {
    std::string key = fmt::format("tokenizer.ggml.{}", flag);
    if (file.find(key) != nullptr) fmt::print("  {:<40} {}\n", flag, value_or(file, key, ""));
  }
}

void print_chat_template(const GgufFile& file) {
  auto chat_template = file.get_string("tokenizer.chat_template");
  if (!chat_template.ok()) {
    fmt::print("chat template: (none)\n");
    return;
  }
  std::string_view text = *chat_template;
  fmt::print("chat template: {} bytes\n", text.size());
  constexpr size_t kShownLines = 12;
  size_t start = 0;
  for (size_t line = 0; line < kShownLines && start < text.size(); ++line) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    fmt::print("  | {}\n", text.substr(start, end - start));
    start = end + 1;
  }
  if (start < text.size()) fmt::print("  | ... ({} more bytes)\n", text.size() - start);
}

// What a request that sets no sampling field gets with this model and no flags, and where each
// value comes from (the model's general.sampling.* keys, else llama.cpp's defaults).
void print_sampling_defaults(const GgufFile& file) {
  RecommendedSampling recommended = read_recommended_sampling(file);
  auto defaults = resolve_sampling_defaults({}, recommended.settings, SamplingDefaultsBase::kModel);
  if (!defaults.ok()) {
    fmt::print("sampling defaults: {}\n", defaults.error().message);
    return;
  }
  fmt::print("sampling defaults (flags and --sampling-defaults change them):\n");
  for (const SamplingDefaults::Field& f : defaults->fields())
    fmt::print("  {:<40} {} ({})\n", f.name, f.value, sampling_source_name(f.source));
  for (const std::string& why : recommended.ignored) fmt::print("  ignored: {}\n", why);
}

int run_inspect(const InspectOptions& options) {
  auto path = resolve_model_path(options.model);
  if (!path.ok()) {
    fmt::print(stderr, "error: {}\n", path.error().message);
    return 1;
  }
  auto file = GgufFile::open(*path);
  if (!file.ok()) {
    fmt::print(stderr, "error: {}\n", file.error().message);
    return 1;
  }
  std::string arch = value_or(*file, "general.architecture", "(unknown)");
  fmt::print("file: {}\n", *path);
  fmt::print("size: {} ({} bytes), GGUF v{}, {} metadata keys, alignment {}\n",
             human_bytes(file->file_size()), file->file_size(), file->version(),
             file->metadata().size(), file->alignment());
  fmt::print("name: {}\n", value_or(*file, "general.name", "(unnamed)"));
  fmt::print("architecture: {}\n", arch);
  print_geometry(*file, arch);
  print_tensor_formats(*file);
  print_vocabulary(*file);
  print_chat_template(*file);
  print_sampling_defaults(*file);
  if (options.list_metadata) {
    fmt::print("metadata:\n");
    for (const GgufKeyValue& kv : file->metadata())
      fmt::print("  {:<48} {:<8} {}\n", kv.key, gguf_type_name(kv.value.type),
                 kv.value.to_display_string());
  }
  if (options.list_tensors) {
    fmt::print("tensor list:\n");
    for (const GgufTensor& t : file->tensors()) {
      std::string shape = fmt::format("{}", t.ne[0]);
      for (uint32_t d = 1; d < t.n_dims; ++d) shape += fmt::format(" x {}", t.ne[d]);
      fmt::print("  {:<36} {:<6} [{}] {}\n", t.name,
                 ggml_type_info(static_cast<uint32_t>(t.type))->name, shape,
                 human_bytes(t.n_bytes));
    }
  }
  return 0;
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand("inspect",
                                     "Print a GGUF model's architecture, geometry, "
                                     "tensor formats, vocabulary and chat template");
  cmd->add_option("-m,--model", options->model, "GGUF file (default: the cached default model)");
  cmd->add_flag("--tensors", options->list_tensors, "also list every tensor");
  cmd->add_flag("--metadata", options->list_metadata, "also list every metadata key");
  cmd->callback([options] {
    int code = run_inspect(*options);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace drift::cli
