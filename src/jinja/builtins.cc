#include "jinja/builtins.h"

#include <fmt/format.h>

namespace drift::jinja {

Expected<std::vector<Value>> bind_arguments(std::string_view function, const CallArgs& args,
                                            std::initializer_list<Parameter> parameters) {
  const size_t n = parameters.size();
  if (args.positional.size() > n) {
    return make_error("{}() takes at most {} argument(s) ({} given)", function, n,
                      args.positional.size());
  }
  std::vector<Value> bound(n);
  std::vector<bool> assigned(n, false);
  for (size_t i = 0; i < args.positional.size(); ++i) {
    bound[i] = args.positional[i];
    assigned[i] = true;
  }
  for (const auto& [name, value] : args.keywords) {
    size_t i = 0;
    for (const Parameter& p : parameters) {
      if (p.name == name) break;
      ++i;
    }
    if (i == n) return make_error("{}() got an unexpected keyword argument '{}'", function, name);
    if (assigned[i])
      return make_error("{}() got multiple values for argument '{}'", function, name);
    bound[i] = value;
    assigned[i] = true;
  }
  size_t i = 0;
  for (const Parameter& p : parameters) {
    if (!assigned[i]) {
      if (!p.default_value) {
        return make_error("{}() missing required argument '{}'", function, p.name);
      }
      bound[i] = *p.default_value;
    }
    ++i;
  }
  return bound;
}

}  // namespace drift::jinja
