#include "jinja/template.h"

#include <exception>
#include <new>

#include "jinja/interpreter.h"

namespace drift::jinja {

Expected<Template> Template::parse(std::string_view source, const SyntaxOptions& syntax,
                                   const ParseLimits& limits) {
  // The engine reports errors as values; only the standard library can still throw (allocation
  // failure), and that must not escape either.
  try {
    DRIFT_ASSIGN_OR_RETURN(StmtList body, parse_template(source, syntax, limits));
    return Template(std::make_shared<const StmtList>(std::move(body)));
  } catch (const std::bad_alloc&) {
    return make_error("out of memory while parsing the template");
  } catch (const std::exception& e) {
    return make_error("internal error while parsing the template: {}", e.what());
  }
}

Expected<Dict> variables_from_json(const Json& variables, const RenderLimits& limits) {
  if (!variables.is_object() && !variables.is_null()) {
    return make_error("template variables must be a JSON object, not {}", variables.type_name());
  }
  Dict dict;
  if (variables.is_null()) return dict;
  for (const auto& [name, json] : variables.items()) {
    auto value = value_from_json(json, limits.max_value_depth);
    if (!value.ok()) return make_error("variable '{}': {}", name, value.error().message);
    dict.set(name, std::move(value).value());
  }
  return dict;
}

Expected<std::string> Template::render(const Json& variables, const RenderOptions& options) const {
  try {
    DRIFT_ASSIGN_OR_RETURN(Dict dict, variables_from_json(variables, options.limits));
    return render(dict, options);
  } catch (const std::bad_alloc&) {
    return make_error("out of memory while rendering the template");
  } catch (const std::exception& e) {
    return make_error("internal error while rendering the template: {}", e.what());
  }
}

Expected<std::string> Template::render(const Dict& variables, const RenderOptions& options) const {
  try {
    Interpreter interpreter(options, variables);
    return interpreter.render(*body_);
  } catch (const std::bad_alloc&) {
    return make_error("out of memory while rendering the template");
  } catch (const std::exception& e) {
    return make_error("internal error while rendering the template: {}", e.what());
  }
}

}  // namespace drift::jinja
