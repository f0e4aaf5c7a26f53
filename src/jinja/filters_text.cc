// jinja2's filters on text: strings in, strings out (capitalize, escape, format, indent,
// lower/upper, replace, safe, string, title, tojson, trim, wordcount). Each follows the Python
// implementation on every value kind.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "jinja/error_kind.h"
#include "jinja/filters_internal.h"
#include "jinja/interpreter.h"
#include "jinja/json.h"
#include "jinja/operators.h"
#include "jinja/pyformat.h"
#include "jinja/pyrepr.h"
#include "jinja/pystring.h"
#include "jinja/unicode.h"

namespace drift::jinja {
namespace {

// Filters that apply a str method keep Markup as Markup (its methods return Markup).
Value like(const Value& input, std::string s) {
  return input.is_markup() ? Value::markup(std::move(s)) : Value::string(std::move(s));
}

Expected<std::string> to_str_checked(Interpreter& in, const Value& v) {
  std::string s = py_str(v);
  DRIFT_RETURN_IF_ERROR(in.check_size(s.size()));
  return s;
}

}  // namespace

Expected<Value> filter_capitalize(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("capitalize", args, {}));
  return like(v, py_capitalize(py_str(v)));
}

Expected<Value> filter_escape(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("escape", args, {}));
  if (v.is_markup()) return v;
  std::string out = html_escape(py_str(v));
  DRIFT_RETURN_IF_ERROR(in.check_size(out.size()));
  return Value::markup(std::move(out));
}

Expected<Value> filter_format(Interpreter& in, const Value& v, CallArgs& args) {
  Value operands;
  if (!args.keywords.empty()) {
    if (!args.positional.empty()) {
      return make_error("can't handle positional and keyword arguments at the same time");
    }
    Dict kwargs;
    for (const auto& [name, value] : args.keywords) kwargs.set(name, value);
    operands = Value::dict(std::move(kwargs));
  } else {
    operands = Value::list(args.positional, ListKind::kTuple);
  }
  const Value format = v.is_string() ? v : text(py_str(v));
  DRIFT_ASSIGN_OR_RETURN(Value out,
                         binary_operation(BinaryOp::kModulo, format, operands, in.limits()));
  DRIFT_RETURN_IF_ERROR(in.check_size(out.as_string().size()));
  return out;
}

Expected<Value> filter_indent(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(
      auto a, bind_arguments("indent", args,
                             {{"width", Value::integer(4)}, {"first", kFalse}, {"blank", kFalse}}));
  std::string indention;
  if (a[0].is_string()) {
    indention = a[0].as_string();
  } else if (a[0].is_integral()) {
    DRIFT_RETURN_IF_ERROR(in.check_size(static_cast<size_t>(std::max<int64_t>(a[0].as_int(), 0))));
    indention.assign(static_cast<size_t>(std::max<int64_t>(a[0].as_int(), 0)), ' ');
  } else {
    return make_error("indent width must be an integer or a string, not {}", type_name(a[0]));
  }
  // jinja2 appends a newline so that splitlines() keeps a trailing empty line.
  const std::vector<std::string> lines = py_splitlines(py_str(v) + "\n", false);
  std::string out;
  auto append = [&](std::string_view s) -> Status {
    DRIFT_RETURN_IF_ERROR(in.check_size(out.size() + s.size()));
    out.append(s);
    return Status::Ok();
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) DRIFT_RETURN_IF_ERROR(append("\n"));
    const bool indent_line = i > 0 && (truthy(a[2]) || !lines[i].empty());
    if (indent_line) DRIFT_RETURN_IF_ERROR(append(indention));
    DRIFT_RETURN_IF_ERROR(append(lines[i]));
  }
  if (truthy(a[1])) out.insert(0, indention);
  return like(v, std::move(out));
}

Expected<Value> filter_lower(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("lower", args, {}));
  return like(v, lower(py_str(v)));
}

Expected<Value> filter_upper(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("upper", args, {}));
  return like(v, upper(py_str(v)));
}

Expected<Value> filter_replace(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(
      auto a, bind_arguments("replace", args,
                             {{"old", std::nullopt}, {"new", std::nullopt}, {"count", kNone}}));
  const int64_t count = a[2].is_integral() ? a[2].as_int() : -1;
  auto out = py_replace(py_str(v), py_str(a[0]), py_str(a[1]), count, in.limits().max_output_bytes);
  if (!out)
    return make_kind_error(ErrorKind::kLimit,
                           "replace() would build a string over the limit of {} bytes",
                           in.limits().max_output_bytes);
  return text(std::move(*out));
}

Expected<Value> filter_safe(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("safe", args, {}));
  return v.is_markup() ? v : Value::markup(py_str(v));
}

Expected<Value> filter_string(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("string", args, {}));
  if (v.is_string()) return v;
  DRIFT_ASSIGN_OR_RETURN(std::string s, to_str_checked(in, v));
  return text(std::move(s));
}

Expected<Value> filter_title(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("title", args, {}));
  return text(jinja_title(py_str(v)));
}

// Hugging Face's tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False) — no HTML escaping, unlike jinja2's own.
Expected<Value> filter_tojson(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments("tojson", args,
                                                {{"ensure_ascii", kFalse},
                                                 {"indent", kNone},
                                                 {"separators", kNone},
                                                 {"sort_keys", kFalse}}));
  JsonDumpOptions options;
  options.ensure_ascii = truthy(a[0]);
  options.sort_keys = truthy(a[3]);
  if (a[1].is_string()) {
    options.indent = a[1].as_string();
  } else if (a[1].is_integral()) {
    const int64_t width = a[1].as_int();
    DRIFT_RETURN_IF_ERROR(in.check_size(static_cast<size_t>(std::max<int64_t>(width, 0))));
    options.indent = std::string(static_cast<size_t>(std::max<int64_t>(width, 0)), ' ');
  } else if (!a[1].is_none()) {
    return make_error("tojson: indent must be an integer or a string, not {}", type_name(a[1]));
  }
  if (options.indent) options.item_separator = ",";
  if (!a[2].is_none()) {
    if (!a[2].is_list() || a[2].as_list().items.size() != 2 ||
        !a[2].as_list().items[0].is_string() || !a[2].as_list().items[1].is_string()) {
      return make_error("tojson: separators must be a pair of strings");
    }
    options.item_separator = a[2].as_list().items[0].as_string();
    options.key_separator = a[2].as_list().items[1].as_string();
  }
  DRIFT_ASSIGN_OR_RETURN(std::string json, json_dumps(v, options, in.limits().max_output_bytes));
  return text(std::move(json));
}

Expected<Value> filter_trim(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments("trim", args, {{"chars", kNone}}));
  if (a[0].is_none()) return like(v, strip(py_str(v), true, true, nullptr));
  if (!a[0].is_string()) return make_error("strip arg must be None or str");
  const std::u32string chars = decode_utf8(a[0].as_string(), Utf8Policy::kStrict);
  return like(v, strip(py_str(v), true, true, &chars));
}

Expected<Value> filter_wordcount(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("wordcount", args, {}));
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : decode_utf8(py_str(v), Utf8Policy::kStrict)) {
    const bool word_char = c == '_' || py_isalpha(c) || py_isdigit(c);
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value::integer(words);
}

}  // namespace drift::jinja
