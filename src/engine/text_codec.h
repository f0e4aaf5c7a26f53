// What the engine needs of a tokenizer: a text prompt or a conversation to token ids, and ids to
// text, whole or incrementally. The real one wraps Tokenizer, the chat prompt builder and
// StreamingDecoder (tokenizer_codec.h); tests use small fakes, so that the engine (and a server
// over it) is tested without a model file.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chat/harmony_parser.h"
#include "chat/tool_call_syntax.h"
#include "engine/request.h"
#include "util/error.h"

namespace drift {

// Decodes one request's generated tokens, one at a time.
class TokenTextStream {
 public:
  virtual ~TokenTextStream() = default;
  // Adds the next token; returns the text that no later token can change (often empty). Bytes
  // that may still become a character are held back. An id it cannot decode is an error.
  virtual Expected<std::string> push(TokenId token) = 0;
  // Ends the stream: everything still held back, incomplete characters included (the engine
  // replaces those by U+FFFD).
  virtual std::string finish() = 0;
};

// Immutable and shared by every thread that submits: encode runs on the submitting thread.
class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual std::vector<TokenId> encode(const TextPrompt& prompt) const = 0;
  // The conversation rendered with the chat template and tokenized so that message text never
  // becomes control tokens; error if the template fails or cannot keep a message plain.
  virtual Expected<std::vector<TokenId>> encode_chat(const ChatPrompt& chat) const = 0;
  // How the chat template writes tool calls, for reading them out of replies.
  virtual ToolCallSyntax tool_call_syntax() const = 0;
  // Set when chat replies are in OpenAI's harmony format (gpt-oss: the template renders harmony
  // and the vocabulary has its markers): the markers' ids, to read replies by. The default: not.
  virtual std::optional<HarmonyTokens> harmony_tokens() const { return std::nullopt; }
  // Ids the engine checked against the vocabulary.
  virtual Expected<std::string> decode(std::span<const TokenId> tokens,
                                       bool render_special) const = 0;
  virtual Expected<std::string> token_text(TokenId token) const = 0;
  virtual std::unique_ptr<TokenTextStream> start_stream() const = 0;
  // A matcher for one request's grammar over this vocabulary (constrained decoding), or why the
  // grammar cannot be used. The default: this codec cannot constrain output.
  virtual Expected<std::unique_ptr<TokenConstraint>> compile_grammar(
      const GrammarSpec& spec) const {
    return make_error("constrained decoding ({}) is not available with this tokenizer",
                      grammar_kind_name(spec.kind));
  }
};

}  // namespace drift
