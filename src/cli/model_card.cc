#include "model_card.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "gguf/gguf_file.h"

namespace drift::cli {
namespace {

// A scalar metadata value as JSON; arrays (vocabularies, per-layer lists) and strings longer
// than a name are left out, as Ollama's model_info leaves out the tokenizer's arrays.
std::optional<nlohmann::json> scalar_json(const GgufValue& v) {
  switch (v.type) {
    case GgufType::kString:
      if (v.s.size() > 256) return std::nullopt;
      return nlohmann::json(std::string(v.s));
    case GgufType::kBool:
      return nlohmann::json(v.u != 0);
    case GgufType::kFloat32:
    case GgufType::kFloat64:
      return nlohmann::json(v.f);
    case GgufType::kArray:
      return std::nullopt;
    default:
      return v.is_integer() && (v.type == GgufType::kInt8 || v.type == GgufType::kInt16 ||
                                v.type == GgufType::kInt32 || v.type == GgufType::kInt64)
                 ? nlohmann::json(v.i)
                 : nlohmann::json(v.u);
  }
}

}  // namespace

Expected<server::ModelCard> read_model_card(const std::string& path,
                                            const std::optional<std::string>& chat_template) {
  DRIFT_ASSIGN_OR_RETURN(GgufFile file, GgufFile::open(path));
  server::ModelCard card;
  card.file_bytes = file.file_size();
  struct stat status {};
  if (::stat(path.c_str(), &status) == 0) card.modified_unix = int64_t(status.st_mtim.tv_sec);
  if (auto arch = file.get_string("general.architecture"); arch.ok())
    card.architecture = std::string(*arch);
  std::map<GgmlType, uint64_t> bytes_by_type;
  for (const GgufTensor& t : file.tensors()) {
    card.parameter_count += t.n_elements;
    bytes_by_type[t.type] += t.n_bytes;
  }
  auto largest = std::max_element(bytes_by_type.begin(), bytes_by_type.end(),
                                  [](const auto& a, const auto& b) { return a.second < b.second; });
  if (largest != bytes_by_type.end())
    if (const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(largest->first)))
      for (char c : std::string_view(info->name))  // Ollama writes "Q4_1", ggml "q4_1"
        card.quantization += char(std::toupper(static_cast<unsigned char>(c)));
  if (chat_template) {
    card.chat_template = *chat_template;
  } else if (auto text = file.get_string("tokenizer.chat_template"); text.ok()) {
    card.chat_template = std::string(*text);
  }
  const std::string arch_prefix = card.architecture + ".";
  for (const GgufKeyValue& kv : file.metadata()) {
    if (!kv.key.starts_with("general.") && !kv.key.starts_with(arch_prefix)) continue;
    if (auto value = scalar_json(kv.value)) card.model_info[std::string(kv.key)] = *value;
  }
  return card;
}

}  // namespace drift::cli
