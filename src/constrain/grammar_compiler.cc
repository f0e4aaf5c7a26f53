#include "constrain/grammar_compiler.h"

#include <llguidance.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <vector>

#include "constrain/grammar_matcher.h"
#include "util/json_limits.h"

namespace drift {

namespace {

// llguidance's tokenize callback: the plain-text tokenization of some bytes (no BOS/EOS, control
// token text stays text), as the model would see them. Called from llguidance's threads, which
// Tokenizer allows (it is immutable).
size_t tokenize_bytes(const void* user_data, const uint8_t* bytes, size_t bytes_len,
                      uint32_t* output_tokens, size_t output_tokens_len) {
  const auto& tokenizer = *static_cast<const Tokenizer*>(user_data);
  const std::vector<int32_t> ids =
      tokenizer.encode(std::string_view(reinterpret_cast<const char*>(bytes), bytes_len),
                       EncodeOptions{.add_special = false, .parse_special = false});
  const size_t n = std::min(ids.size(), output_tokens_len);
  for (size_t i = 0; i < n; ++i) output_tokens[i] = uint32_t(ids[i]);
  return ids.size();
}

int32_t end_of_output_token(const Tokenizer& tokenizer) {
  if (tokenizer.eot()) return *tokenizer.eot();
  if (tokenizer.eos()) return *tokenizer.eos();
  return tokenizer.eog_tokens().empty() ? 0 : tokenizer.eog_tokens().front();
}

// JSON output on one line, as json.dumps writes it ({"a": 1, "b": [2, 3]}), unless the schema
// sets llguidance's layout itself ("x-guidance"). llguidance's default allows any run of
// whitespace between tokens, and a small model sampling at a high temperature can spend its
// whole max_tokens there.
Expected<std::string> with_compact_layout(const GrammarSpec& spec) {
  using nlohmann::json;
  json schema = json{{"type", "object"}};
  if (spec.kind == GrammarKind::kJsonSchema) {
    Expected<json> parsed = parse_bounded_json<json>(spec.source);
    if (!parsed.ok()) return make_error("invalid json_schema: it {}", parsed.error().message);
    schema = std::move(parsed).value();
  }
  if (!schema.is_object() || schema.contains("x-guidance")) return spec.source;
  schema["x-guidance"] = {
      {"whitespace_flexible", false}, {"item_separator", ", "}, {"key_separator", ": "}};
  return schema.dump(-1, ' ', false, json::error_handler_t::replace);
}

const char* llg_constraint_type(GrammarKind kind) {
  switch (kind) {
    case GrammarKind::kJsonSchema:
    case GrammarKind::kJsonObject:  // as the schema {"type": "object"} (with_compact_layout)
      return "json_schema";
    case GrammarKind::kRegex:
      return "regex";
    case GrammarKind::kLark:
      return "lark";
  }
  return "json_schema";
}

}  // namespace

Expected<std::unique_ptr<GrammarCompiler>> GrammarCompiler::create(const Tokenizer& tokenizer,
                                                                   const GrammarLimits& limits) {
  std::unique_ptr<GrammarCompiler> compiler(
      new GrammarCompiler(std::make_unique<Tokenizer>(tokenizer), limits));
  const int32_t n_vocab = tokenizer.vocab_size();
  // Every token's bytes, as llguidance wants them: the text it adds to the output, and for a
  // control token 0xFF then its name, which no plain text can produce.
  std::vector<uint32_t> lengths(static_cast<size_t>(n_vocab));  // [n_vocab]
  std::vector<uint8_t> bytes;                                   // the tokens' bytes, concatenated
  bytes.reserve(size_t(n_vocab) * 8);
  for (int32_t t = 0; t < n_vocab; ++t) {
    const size_t before = bytes.size();
    if (tokenizer.is_control(t)) {
      DRIFT_ASSIGN_OR_RETURN(std::string_view text, tokenizer.token_text(t));
      bytes.push_back(0xFF);
      bytes.insert(bytes.end(), text.begin(), text.end());
    } else {
      DRIFT_ASSIGN_OR_RETURN(std::string_view piece, tokenizer.token_to_piece(t, false));
      bytes.insert(bytes.end(), piece.begin(), piece.end());
    }
    lengths[size_t(t)] = uint32_t(bytes.size() - before);
  }
  compiler->end_token_ = end_of_output_token(tokenizer);

  LlgTokenizerInit init{};
  init.vocab_size = uint32_t(n_vocab);
  init.tok_eos = uint32_t(compiler->end_token_);
  init.token_lens = lengths.data();
  init.token_bytes = bytes.data();
  // Tokenizer::encode takes text (invalid UTF-8 becomes U+FFFD), not arbitrary bytes.
  init.tokenize_assumes_string = true;
  init.tokenize_fn = tokenize_bytes;
  init.tokenize_user_data = compiler->tokenizer_.get();
  std::array<char, 1024> error{};
  compiler->llg_ = llg_new_tokenizer(&init, error.data(), error.size());
  if (!compiler->llg_)
    return make_error("grammar compiler: llguidance refused the vocabulary: {}", error.data());
  return compiler;
}

GrammarCompiler::~GrammarCompiler() { llg_free_tokenizer(llg_); }

Expected<std::unique_ptr<TokenConstraint>> GrammarCompiler::compile(const GrammarSpec& spec) const {
  if (spec.source.size() > kMaxGrammarSourceBytes)
    return make_error("the {} is {} bytes; at most {} are accepted", grammar_kind_name(spec.kind),
                      spec.source.size(), kMaxGrammarSourceBytes);
  if (spec.source.find('\0') != std::string::npos)
    return make_error("the {} contains a NUL character", grammar_kind_name(spec.kind));
  LlgConstraintInit init{};
  llg_constraint_init_set_defaults(&init, llg_);
  init.log_stderr_level = 0;
  init.log_buffer_level = 0;
  // Messages go to clients: the reason, without llguidance's dump of the grammar.
  init.limits.verbose_errors = false;
  std::string source = spec.source;
  if (spec.kind == GrammarKind::kJsonSchema || spec.kind == GrammarKind::kJsonObject) {
    DRIFT_ASSIGN_OR_RETURN(source, with_compact_layout(spec));
  }
  auto matcher = std::make_unique<GrammarMatcher>(
      llg_new_matcher(&init, llg_constraint_type(spec.kind), source.c_str()));
  if (Status s = matcher->check_when_compiled(end_token_, limits_.first_masks); !s.ok())
    return make_error("invalid {}: {}", grammar_kind_name(spec.kind), s.message());
  return std::unique_ptr<TokenConstraint>(std::move(matcher));
}

}  // namespace drift
