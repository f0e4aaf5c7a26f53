// A fake engine's codec for tests that script a reply's exact text (openai_service_test.cc,
// anthropic_service_test.cc): FakeCodec's prompts, each reply token decoding to one byte.
#pragma once

#include <memory>
#include <string>

#include "../engine/engine_fakes.h"

namespace drift::server {

// FakeCodec's encoding (a token per byte), with each token decoding to its byte, so that a test
// can script a reply's exact text.
class ByteCodec final : public TextCodec {
 public:
  std::vector<TokenId> encode(const TextPrompt& prompt) const override {
    return fake_.encode(prompt);
  }
  Expected<std::vector<TokenId>> encode_chat(const ChatPrompt& chat) const override {
    return fake_.encode_chat(chat);
  }
  ToolCallSyntax tool_call_syntax() const override { return ToolCallSyntax::kHermes; }
  Expected<std::string> decode(std::span<const TokenId> tokens, bool) const override {
    std::string text;
    for (TokenId t : tokens) text += piece(t);
    return text;
  }
  Expected<std::string> token_text(TokenId token) const override { return piece(token); }
  std::unique_ptr<TokenTextStream> start_stream() const override {
    struct Stream final : TokenTextStream {
      Expected<std::string> push(TokenId token) override { return piece(token); }
      std::string finish() override { return {}; }
    };
    return std::make_unique<Stream>();
  }

 private:
  static std::string piece(TokenId t) { return t < 2 ? "" : std::string(1, char(t - 2)); }
  drift::testing::FakeCodec fake_;
};

}  // namespace drift::server
