// `drift tokenize -m MODEL -p TEXT`: the token ids drift gives for a text (the same ids as
// llama.cpp's llama-tokenize on the same GGUF).
#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "commands.h"
#include "gguf/gguf_file.h"
#include "model_locator.h"
#include "tokenizer/tokenizer.h"

namespace drift::cli {
namespace {

struct TokenizeOptions {
  std::optional<std::string> model;
  std::optional<std::string> prompt;
  std::optional<std::string> file;
  bool no_special_tokens = false;  // don't add BOS/EOS
  bool no_parse_special = false;   // control-token text stays text
  bool show_pieces = false;
};

Expected<std::string> read_input(const TokenizeOptions& o) {
  if (o.prompt) return *o.prompt;
  std::ifstream in(*o.file, std::ios::binary);
  if (!in) return make_error("cannot read '{}'", *o.file);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int run_tokenize(const TokenizeOptions& o) {
  auto fail = [](const Error& e) {
    fmt::print(stderr, "error: {}\n", e.message);
    return 1;
  };
  if (o.prompt.has_value() == o.file.has_value())
    return fail(Error{"give the text with exactly one of -p TEXT or -f FILE"});
  auto path = resolve_model_path(o.model);
  if (!path.ok()) return fail(path.error());
  auto file = GgufFile::open(*path);
  if (!file.ok()) return fail(file.error());
  auto tokenizer = Tokenizer::from_gguf(*file);
  if (!tokenizer.ok()) return fail(tokenizer.error());
  auto text = read_input(o);
  if (!text.ok()) return fail(text.error());

  EncodeOptions options;
  options.add_special = !o.no_special_tokens;
  options.parse_special = !o.no_parse_special;
  std::vector<int32_t> ids = tokenizer->encode(*text, options);
  if (o.show_pieces) {
    for (int32_t id : ids) {
      auto piece = tokenizer->token_to_piece(id, /*render_special=*/true);
      fmt::print("{:>7} -> '{}'\n", id, piece.ok() ? *piece : "?");
    }
  } else {
    fmt::print("{}\n", fmt::join(ids, " "));
  }
  fmt::print(stderr, "{} tokens\n", ids.size());
  return 0;
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of a text");
  cmd->add_option("-m,--model", options->model, "GGUF file (default: the cached default model)");
  cmd->add_option("-p,--prompt", options->prompt, "text to tokenize");
  cmd->add_option("-f,--file", options->file, "file whose bytes to tokenize");
  cmd->add_flag("--no-bos", options->no_special_tokens,
                "do not add the BOS/EOS tokens the model asks for");
  cmd->add_flag("--no-parse-special", options->no_parse_special,
                "tokenize control-token text (e.g. <|im_start|>) as plain text");
  cmd->add_flag("--pieces", options->show_pieces, "print each id with its text");
  cmd->callback([options] {
    int code = run_tokenize(*options);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace drift::cli
