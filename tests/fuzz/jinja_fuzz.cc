// libFuzzer target for the chat-template engine with its sandbox limits on: a template (from a
// model file: untrusted) and a conversation (from a client: untrusted) must render or fail with
// an Error; nothing may crash, hang, recurse without bound or grow without bound.
//
// Input: template source, a NUL byte, then the messages as JSON. Without a NUL the whole input
// is the template and a fixed two-turn conversation is rendered; messages that are not a JSON
// array of objects are rendered with SmolLM2's template instead, so both sides get fuzzed.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "tokenizer/chat_template.h"

namespace {

constexpr std::string_view kSmolLM2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

const drift::jinja::Json& default_messages() {
  static const drift::jinja::Json messages = drift::jinja::Json::parse(
      R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},)"
      R"({"role":"assistant","content":"Hello."},{"role":"user","content":"Name a color."}])");
  return messages;
}

// Small enough that one input takes milliseconds, so the fuzzer explores instead of waiting.
drift::jinja::RenderLimits fuzz_limits() {
  drift::jinja::RenderLimits limits;
  limits.max_steps = 200'000;
  limits.max_output_bytes = 1u << 20;
  limits.max_range = 10'000;
  return limits;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  std::string source(input.substr(0, nul));
  drift::ChatTemplateInputs inputs;
  inputs.messages = default_messages();
  if (nul != std::string_view::npos) {
    drift::jinja::Json messages =
        drift::jinja::Json::parse(input.substr(nul + 1), nullptr, /*allow_exceptions=*/false);
    if (!messages.is_discarded() && messages.is_array()) {
      inputs.messages = std::move(messages);
    } else {
      source = std::string(kSmolLM2Template);
    }
  }
  inputs.bos_token = "<s>";
  inputs.eos_token = "</s>";
  inputs.limits = fuzz_limits();
  inputs.clock = [] { return std::tm{}; };
  auto tmpl = drift::ChatTemplate::parse(std::move(source));
  if (!tmpl.ok()) return 0;
  auto text = tmpl->render(inputs);
  if (text.ok() && text->size() > inputs.limits.max_output_bytes) abort();
  return 0;
}
