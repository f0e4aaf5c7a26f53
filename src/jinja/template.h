// drift's Jinja engine: parse a template once, render it many times (from any number of threads)
// with JSON variables. It renders what Python's jinja2 renders under Hugging Face's chat
// template settings — ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with
// loop controls, Hugging Face's tojson, raise_exception and strftime_now — byte for byte, for
// the language templates use. Parse and render failures are Errors naming the line and column,
// with a jinja::ErrorKind as their code (error_kind.h); nothing a template does can crash, hang or
// escape the sandbox (see RenderLimits).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "jinja/ast.h"
#include "jinja/json.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "jinja/render_options.h"
#include "jinja/value.h"
#include "util/error.h"

namespace drift::jinja {

class Template {
 public:
  static Expected<Template> parse(std::string_view source, const SyntaxOptions& syntax = {},
                                  const ParseLimits& limits = {});

  // Renders with the members of `variables` (a JSON object) as the template's variables, on top
  // of the globals (range, namespace, dict, raise_exception, strftime_now).
  Expected<std::string> render(const Json& variables, const RenderOptions& options = {}) const;
  // The same with variables already converted to values.
  Expected<std::string> render(const Dict& variables, const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const StmtList> body) : body_(std::move(body)) {}

  std::shared_ptr<const StmtList> body_;
};

// True for the name of a global function (range, namespace, dict, raise_exception,
// strftime_now): a variable of that name would hide it from the template.
bool is_global_name(std::string_view name);

// Converts a JSON object to template variables, each value checked against the depth limit.
Expected<Dict> variables_from_json(const Json& variables, const RenderLimits& limits);

}  // namespace drift::jinja
