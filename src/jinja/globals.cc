// The global functions of Hugging Face's chat template environment: jinja2's range (capped by
// the sandbox), namespace and dict, plus raise_exception and strftime_now.
#include <fmt/format.h>
#include <locale.h>

#include <cmath>
#include <ctime>

#include "jinja/builtins.h"
#include "jinja/error_kind.h"
#include "jinja/interpreter.h"
#include "jinja/pyrepr.h"
#include "jinja/template.h"

namespace drift::jinja {
namespace {

Expected<Value> global_range(Interpreter& in, CallArgs& args) {
  if (!args.keywords.empty()) return make_error("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) {
    return make_error("range expected at most 3 arguments, got {}", p.size());
  }
  for (const Value& v : p) {
    if (!v.is_integral()) {
      return make_error("'{}' object cannot be interpreted as an integer", type_name(v));
    }
  }
  const int64_t start = p.size() == 1 ? 0 : p[0].as_int();
  const int64_t stop = p.size() == 1 ? p[0].as_int() : p[1].as_int();
  const int64_t step = p.size() == 3 ? p[2].as_int() : 1;
  if (step == 0) return make_error("range() arg 3 must not be zero");
  // Count in long double: stop - start may not fit in 64 bits.
  const long double span = static_cast<long double>(stop) - static_cast<long double>(start);
  long double count = span / static_cast<long double>(step);
  count = count <= 0 ? 0 : std::ceil(count);
  if (count > static_cast<long double>(in.limits().max_range)) {
    return make_kind_error(ErrorKind::kLimit,
                           "Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).",
                           in.limits().max_range);
  }
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) {
    // Every item lies between start and stop, but i * step alone may not fit in 64 bits.
    const __int128 item = static_cast<__int128>(start) + static_cast<__int128>(i) * step;
    items.push_back(Value::integer(static_cast<int64_t>(item)));
  }
  return in.make_list(std::move(items));
}

// dict(mapping_or_pairs, **kwargs), as Python's dict() (and Hugging Face's TemplateDict).
Expected<Dict> dict_from_arguments(Interpreter& in, std::string_view function, CallArgs& args) {
  if (args.positional.size() > 1) {
    return make_error("{} expected at most 1 argument, got {}", function, args.positional.size());
  }
  Dict dict;
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict() || source.is_namespace()) {
      for (const auto& [key, value] : source.as_dict().entries()) dict.set(key, value);
    } else {
      DRIFT_ASSIGN_OR_RETURN(std::shared_ptr<const List> pairs, in.iterate(source));
      for (const Value& pair : pairs->items) {
        if (!pair.is_list() || pair.as_list().items.size() != 2) {
          return make_error("{}: each element must be a key/value pair", function);
        }
        const Value& key = pair.as_list().items[0];
        if (!is_hashable_key(key)) return make_error("unhashable type: '{}'", type_name(key));
        dict.set(key, pair.as_list().items[1]);
      }
    }
  }
  for (const auto& [name, value] : args.keywords) dict.set(name, value);
  return dict;
}

Expected<Value> global_dict(Interpreter& in, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(Dict dict, dict_from_arguments(in, "dict", args));
  return Value::dict(std::move(dict));
}

Expected<Value> global_namespace(Interpreter& in, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(Dict attributes, dict_from_arguments(in, "namespace", args));
  for (const auto& [name, value] : attributes.entries()) {
    if (name.is_string() && !name.as_string().empty() && name.as_string().front() == '_') {
      return make_error(
          "Chat templates cannot store underscore-prefixed attributes on a namespace, but got "
          "'{}'. Please rename the attribute.",
          name.as_string());
    }
  }
  return in.make_namespace(std::move(attributes));
}

// The template's own error: the message is what the user sees, as in Hugging Face's
// raise_exception (a jinja2 TemplateError carrying it). Its kind tells a caller that the template
// refused its inputs, rather than failed.
Expected<Value> global_raise_exception(Interpreter&, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a,
                         bind_arguments("raise_exception", args, {{"message", std::nullopt}}));
  return Error{py_str(a[0]), make_error_code(ErrorKind::kRaised)};
}

// Python's datetime.now().strftime(format) on a naive local time: %z and %Z are empty, %f is
// microseconds (always 000000 here: the clock has second resolution), the rest is C strftime in
// the C locale (English month and day names, as Python in a default process).
Expected<Value> global_strftime_now(Interpreter& in, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments("strftime_now", args, {{"format", std::nullopt}}));
  if (!a[0].is_string()) {
    return make_error("strftime() argument 1 must be str, not {}", type_name(a[0]));
  }
  const std::string& format = a[0].as_string();
  std::string c_format;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size()) {
      const char spec = format[i + 1];
      if (spec == 'z' || spec == 'Z') {
        ++i;
        continue;
      }
      if (spec == 'f') {
        c_format += "000000";
        ++i;
        continue;
      }
      c_format += format.substr(i, 2);
      ++i;
      continue;
    }
    c_format.push_back(format[i]);
  }
  const std::tm now = in.now();
  const locale_t c_locale = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(0));
  if (c_locale == static_cast<locale_t>(0)) return make_error("cannot create the C locale");
  // Each conversion expands to at most a few dozen bytes; grow until the result fits.
  std::string out;
  for (size_t size = c_format.size() * 4 + 64; size <= c_format.size() * 64 + 1024; size *= 2) {
    out.assign(size, '\0');
    const size_t n = strftime_l(out.data(), out.size(), c_format.c_str(), &now, c_locale);
    if (n > 0 || c_format.empty()) {
      out.resize(n);
      freelocale(c_locale);
      return Value::string(std::move(out));
    }
  }
  freelocale(c_locale);
  // strftime reports an empty result and an overflow the same way; a format that only produces
  // empty conversions lands here.
  return Value::string("");
}

}  // namespace

bool is_global_name(std::string_view name) {
  static const Dict globals = make_globals();
  return globals.find(name) != nullptr;
}

Dict make_globals() {
  Dict globals;
  globals.set("range", Value::function("range", global_range));
  globals.set("dict", Value::function("dict", global_dict));
  globals.set("namespace", Value::function("namespace", global_namespace));
  globals.set("raise_exception", Value::function("raise_exception", global_raise_exception));
  globals.set("strftime_now", Value::function("strftime_now", global_strftime_now));
  return globals;
}

}  // namespace drift::jinja
