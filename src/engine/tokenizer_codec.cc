#include "engine/tokenizer_codec.h"

#include <mutex>

#include "constrain/grammar_compiler.h"
#include "tokenizer/streaming_decoder.h"

namespace drift {

namespace {

class TokenizerTextStream final : public TokenTextStream {
 public:
  explicit TokenizerTextStream(const Tokenizer& tokenizer) : decoder_(tokenizer) {}
  Expected<std::string> push(TokenId token) override { return decoder_.push(token); }
  std::string finish() override { return decoder_.finish(); }

 private:
  StreamingDecoder decoder_;
};

class TokenizerCodec final : public TextCodec {
 public:
  TokenizerCodec(Tokenizer tokenizer, ChatPromptBuilder chat)
      : tokenizer_(std::move(tokenizer)),
        chat_(std::move(chat)),
        syntax_(detect_tool_call_syntax(chat_.chat_template().source())) {
    // A harmony template over a vocabulary without the markers could not be read by id.
    if (syntax_ == ToolCallSyntax::kHarmony) {
      harmony_ = find_harmony_tokens(tokenizer_);
      if (!harmony_) syntax_ = ToolCallSyntax::kGeneric;
    }
  }

  std::vector<TokenId> encode(const TextPrompt& prompt) const override {
    EncodeOptions options;
    options.add_special = prompt.add_special;
    options.parse_special = prompt.parse_special;
    return tokenizer_.encode(prompt.text, options);
  }

  Expected<std::vector<TokenId>> encode_chat(const ChatPrompt& chat) const override {
    jinja::Json conversation = jinja::Json::array();
    for (const ChatMessage& m : chat.messages) {
      jinja::Json message{{"role", m.role}, {"content", m.content}};
      if (m.name) message["name"] = *m.name;
      if (m.reasoning_content) {
        message["reasoning_content"] = *m.reasoning_content;
        // gpt-oss's template reads an earlier turn's analysis as "thinking".
        if (harmony_) message["thinking"] = *m.reasoning_content;
      }
      if (!m.tool_calls.is_null()) message["tool_calls"] = m.tool_calls;
      if (m.tool_call_id) message["tool_call_id"] = *m.tool_call_id;
      conversation.push_back(std::move(message));
    }
    ChatTemplateInputs inputs;
    inputs.add_generation_prompt = true;
    inputs.extra_context = chat.template_kwargs;
    if (chat.tools && syntax_ == ToolCallSyntax::kGeneric) {
      // The template cannot show tools: a system message lists them, and earlier calls become
      // the JSON replies that message asks for.
      inputs.messages = with_generic_tools(conversation, *chat.tools, chat.tool_call_required);
    } else {
      inputs.messages = std::move(conversation);
      inputs.tools = chat.tools;
    }
    return tokenize_chat(chat_, tokenizer_, std::move(inputs));
  }

  ToolCallSyntax tool_call_syntax() const override { return syntax_; }
  std::optional<HarmonyTokens> harmony_tokens() const override { return harmony_; }

  Expected<std::string> decode(std::span<const TokenId> tokens,
                               bool render_special) const override {
    return tokenizer_.decode(tokens, {.render_special = render_special});
  }

  Expected<std::string> token_text(TokenId token) const override {
    DRIFT_ASSIGN_OR_RETURN(std::string_view piece,
                           tokenizer_.token_to_piece(token, /*render_special=*/true));
    return std::string(piece);
  }

  std::unique_ptr<TokenTextStream> start_stream() const override {
    return std::make_unique<TokenizerTextStream>(tokenizer_);
  }

  Expected<std::unique_ptr<TokenConstraint>> compile_grammar(
      const GrammarSpec& spec) const override {
    // The compiler indexes the whole vocabulary: built by the first request that needs it, so
    // that a server that never constrains output never pays for it.
    std::call_once(compiler_once_, [this] {
      Expected<std::unique_ptr<GrammarCompiler>> compiler = GrammarCompiler::create(tokenizer_);
      if (compiler.ok()) {
        compiler_ = std::move(*compiler);
      } else {
        compiler_error_ = compiler.error().message;
      }
    });
    if (!compiler_) return Error{compiler_error_};
    return compiler_->compile(spec);
  }

 private:
  Tokenizer tokenizer_;
  ChatPromptBuilder chat_;
  ToolCallSyntax syntax_;
  std::optional<HarmonyTokens> harmony_;
  mutable std::once_flag compiler_once_;
  mutable std::unique_ptr<GrammarCompiler> compiler_;
  mutable std::string compiler_error_;
};

}  // namespace

std::shared_ptr<const TextCodec> make_tokenizer_codec(Tokenizer tokenizer, ChatPromptBuilder chat) {
  return std::make_shared<TokenizerCodec>(std::move(tokenizer), std::move(chat));
}

}  // namespace drift
