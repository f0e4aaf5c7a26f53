#include "jinja/template.h"

#include <exception>
#include <new>

#include "jinja/error_kind.h"
#include "jinja/interpreter.h"

namespace drift::jinja {

Expected<Template> Template::parse(std::string_view source, const SyntaxOptions& syntax,
                                   const ParseLimits& limits) {
  // The engine reports errors as values; only the standard library can still throw (allocation
  // failure), and that must not escape either.
  try {
    Expected<StmtList> body = parse_template(source, syntax, limits);
    if (!body.ok()) return with_default_kind(body.error(), ErrorKind::kSyntax);
    return Template(std::make_shared<const StmtList>(std::move(body).value()));
  } catch (const std::bad_alloc&) {
    return make_kind_error(ErrorKind::kLimit, "out of memory while parsing the template");
  } catch (const std::exception& e) {
    return make_kind_error(ErrorKind::kSyntax, "internal error while parsing the template: {}",
                           e.what());
  }
}

Expected<Dict> variables_from_json(const Json& variables, const RenderLimits& limits) {
  if (!variables.is_object() && !variables.is_null()) {
    return make_kind_error(ErrorKind::kInvalidVariables,
                           "template variables must be a JSON object, not {}",
                           variables.type_name());
  }
  Dict dict;
  if (variables.is_null()) return dict;
  for (const auto& [name, json] : variables.items()) {
    auto value = value_from_json(json, limits.max_value_depth);
    if (!value.ok())
      return make_kind_error(ErrorKind::kInvalidVariables, "variable '{}': {}", name,
                             value.error().message);
    dict.set(name, std::move(value).value());
  }
  return dict;
}

Expected<std::string> Template::render(const Json& variables, const RenderOptions& options) const {
  try {
    DRIFT_ASSIGN_OR_RETURN(Dict dict, variables_from_json(variables, options.limits));
    return render(dict, options);
  } catch (const std::bad_alloc&) {
    return make_kind_error(ErrorKind::kLimit, "out of memory while rendering the template");
  } catch (const std::exception& e) {
    return make_kind_error(ErrorKind::kRuntime, "internal error while rendering the template: {}",
                           e.what());
  }
}

Expected<std::string> Template::render(const Dict& variables, const RenderOptions& options) const {
  // A failure without a kind of its own (raise_exception, a limit) is the template's error.
  try {
    Interpreter interpreter(options, variables);
    Expected<std::string> out = interpreter.render(*body_);
    if (!out.ok()) return with_default_kind(out.error(), ErrorKind::kRuntime);
    return out;
  } catch (const std::bad_alloc&) {
    return make_kind_error(ErrorKind::kLimit, "out of memory while rendering the template");
  } catch (const std::exception& e) {
    return make_kind_error(ErrorKind::kRuntime, "internal error while rendering the template: {}",
                           e.what());
  }
}

}  // namespace drift::jinja
