#include "engine/tokenizer_codec.h"

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
  explicit TokenizerCodec(Tokenizer tokenizer) : tokenizer_(std::move(tokenizer)) {}

  std::vector<TokenId> encode(const TextPrompt& prompt) const override {
    EncodeOptions options;
    options.add_special = prompt.add_special;
    options.parse_special = prompt.parse_special;
    return tokenizer_.encode(prompt.text, options);
  }

  std::unique_ptr<TokenTextStream> start_stream() const override {
    return std::make_unique<TokenizerTextStream>(tokenizer_);
  }

 private:
  Tokenizer tokenizer_;
};

}  // namespace

std::shared_ptr<const TextCodec> make_tokenizer_codec(Tokenizer tokenizer) {
  return std::make_shared<TokenizerCodec>(std::move(tokenizer));
}

}  // namespace drift
