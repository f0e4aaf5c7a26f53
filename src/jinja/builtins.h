// The names a template can use beyond its own: filters (`x | trim`), tests (`x is defined`),
// methods of strings, dicts and lists (`text.strip()`, `message.get('content')`) and global
// functions (range, namespace, dict, raise_exception, strftime_now). Each group lives in its own
// file; this header is their shared index.
#pragma once

#include <optional>
#include <string_view>

#include "jinja/value.h"
#include "util/error.h"

namespace drift::jinja {

class Interpreter;

using FilterFunction = Expected<Value> (*)(Interpreter&, const Value& input, CallArgs& args);
using TestFunction = Expected<bool> (*)(Interpreter&, const Value& input, CallArgs& args);

// nullptr if there is no such filter / test.
FilterFunction find_filter(std::string_view name);
TestFunction find_test(std::string_view name);

// `object.name` where `name` is a method of the object's Python type: a function bound to the
// object. Methods that mutate (list.append, dict.update, ...) give an undefined value whose use
// fails, as in jinja2's ImmutableSandboxedEnvironment. nullopt if the type has no such method.
std::optional<Value> find_method(const Value& object, std::string_view name);

// The global functions, as Hugging Face's chat template environment defines them.
Dict make_globals();

// ---- argument binding shared by the builtins --------------------------------------------------

struct Parameter {
  std::string_view name;
  std::optional<Value> default_value;  // nullopt: required
};

// Binds positional and keyword arguments to `parameters` like a Python call would: too many
// arguments, unknown or duplicate keywords and missing required ones are errors naming
// `function`.
Expected<std::vector<Value>> bind_arguments(std::string_view function, const CallArgs& args,
                                            std::initializer_list<Parameter> parameters);

}  // namespace drift::jinja
