#include "tokenizer/chat_template.h"

#include <array>
#include <string_view>

namespace drift {
namespace {

// Variables apply_chat_template passes itself; extra context cannot replace them (in Python
// that is a "got multiple values for keyword argument" TypeError).
constexpr std::array<std::string_view, 4> kReservedVariables = {"messages", "tools", "documents",
                                                                "add_generation_prompt"};

// Keeps the template's error kind (jinja/error_kind.h): callers tell a refusal from a failure.
Error chat_error(const Error& error) {
  return Error{fmt::format("chat template: {}", error.message), error.code};
}

}  // namespace

Expected<ChatTemplate> ChatTemplate::parse(std::string source) {
  auto compiled = jinja::Template::parse(source);
  if (!compiled.ok()) return chat_error(compiled.error());
  return ChatTemplate(std::move(source), std::move(compiled).value());
}

Expected<ChatTemplate> ChatTemplate::from_gguf(const GgufFile& file) {
  if (!file.find("tokenizer.chat_template")) {
    return make_error("the model has no chat template (no tokenizer.chat_template in {})",
                      file.path());
  }
  DRIFT_ASSIGN_OR_RETURN(std::string_view source, file.get_string("tokenizer.chat_template"));
  return parse(std::string(source));
}

Expected<std::string> ChatTemplate::render(const ChatTemplateInputs& inputs) const {
  if (!inputs.messages.is_array()) {
    return make_error("chat template: messages must be a JSON array, not {}",
                      inputs.messages.type_name());
  }
  for (const jinja::Json& message : inputs.messages) {
    if (!message.is_object()) {
      return make_error("chat template: each message must be a JSON object, not {}",
                        message.type_name());
    }
  }
  if (!inputs.extra_context.is_object()) {
    return make_error("chat template: extra context must be a JSON object, not {}",
                      inputs.extra_context.type_name());
  }

  // Converted straight to template values (depth-checked), never copied as JSON: a copy of a
  // hostile, deeply nested message would recurse as deep as the nesting.
  const uint32_t max_depth = inputs.limits.max_value_depth;
  jinja::Dict variables;
  auto add = [&](std::string_view name, const jinja::Json& json) -> Status {
    auto value = jinja::value_from_json(json, max_depth);
    if (!value.ok()) return make_error("chat template: {}: {}", name, value.error().message);
    variables.set(std::string(name), std::move(value).value());
    return Status::Ok();
  };
  DRIFT_RETURN_IF_ERROR(add("messages", inputs.messages));
  if (inputs.tools) {
    DRIFT_RETURN_IF_ERROR(add("tools", *inputs.tools));
  } else {
    variables.set("tools", jinja::Value::none());
  }
  variables.set("documents", jinja::Value::none());
  variables.set("add_generation_prompt", jinja::Value::boolean(inputs.add_generation_prompt));
  if (inputs.bos_token) variables.set("bos_token", jinja::Value::string(*inputs.bos_token));
  if (inputs.eos_token) variables.set("eos_token", jinja::Value::string(*inputs.eos_token));
  for (const auto& [name, value] : inputs.extra_context.items()) {
    for (std::string_view reserved : kReservedVariables) {
      if (name == reserved) {
        return make_error("chat template: extra context may not set '{}'", name);
      }
    }
    // A kwarg named like a built-in would make the template fail when it calls it, which would
    // read as the template's fault; it is the caller's.
    if (jinja::is_global_name(name)) {
      return make_error(
          "chat template: extra context may not set '{}', a function the template language "
          "provides",
          name);
    }
    DRIFT_RETURN_IF_ERROR(add(name, value));
  }

  jinja::RenderOptions options;
  options.limits = inputs.limits;
  options.clock = inputs.clock;
  auto rendered = compiled_.render(variables, options);
  if (!rendered.ok()) return chat_error(rendered.error());
  return rendered;
}

}  // namespace drift
