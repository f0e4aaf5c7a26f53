// jinja2's builtin filters as Hugging Face's chat template environment has them (its own
// tojson included), each following the Python implementation's behaviour on every value kind.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_interpreter.h"
#include "tokenizer/jinja_json.h"
#include "tokenizer/jinja_operators.h"
#include "tokenizer/jinja_pyformat.h"
#include "tokenizer/jinja_pyrepr.h"
#include "tokenizer/jinja_pystring.h"
#include "tokenizer/jinja_unicode.h"

namespace drift::jinja {
namespace {

const Value kNone = Value::none();
const Value kFalse = Value::boolean(false);
const Value kTrue = Value::boolean(true);
const Value kEmpty = Value::string("");

Value text(std::string s) { return Value::string(std::move(s)); }

// Filters that apply a str method keep Markup as Markup (its methods return Markup).
Value like(const Value& input, std::string s) {
  return input.is_markup() ? Value::markup(std::move(s)) : Value::string(std::move(s));
}

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0 (environment.getitem, so
// keys before attributes); an integer attribute is an index.
Expected<Value> attribute_path(Interpreter& in, const Value& item, const Value& attribute) {
  if (attribute.is_none()) return item;
  if (!attribute.is_string()) return in.get_item(item, attribute);
  Value current = item;
  std::string_view path = attribute.as_string();
  while (true) {
    const size_t dot = path.find('.');
    const std::string_view part = path.substr(0, dot);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(),
                                                      [](char c) { return c >= '0' && c <= '9'; });
    if (numeric && part.size() < 18) {
      DRIFT_ASSIGN_OR_RETURN(current,
                             in.get_item(current, Value::integer(std::stoll(std::string(part)))));
    } else {
      DRIFT_ASSIGN_OR_RETURN(current, in.get_item(current, Value::string(std::string(part))));
    }
    if (dot == std::string_view::npos) return current;
    path.remove_prefix(dot + 1);
  }
}

// Sort keys compare strings case-insensitively unless asked otherwise.
Value ignore_case(const Value& v) { return v.is_string() ? text(lower(v.as_string())) : v; }

Expected<std::vector<Value>> items_of(Interpreter& in, const Value& v) {
  DRIFT_ASSIGN_OR_RETURN(std::shared_ptr<const List> list, in.iterate(v));
  return list->items;
}

// Stable sort by `keys` (Python's sorted with key=..., reverse=...). An uncomparable pair of
// keys is an error, as in Python.
Expected<std::vector<size_t>> sorted_order(const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::optional<Error> failure;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (failure) return false;
    auto r = reverse ? compare(keys[b], keys[a]) : compare(keys[a], keys[b]);
    if (!r.ok()) {
      failure = r.error();
      return false;
    }
    return *r < 0;
  });
  if (failure) return *failure;
  return order;
}

Expected<std::string> to_str_checked(Interpreter& in, const Value& v) {
  std::string s = py_str(v);
  DRIFT_RETURN_IF_ERROR(in.check_size(s.size()));
  return s;
}

// ---- the filters ----

Expected<Value> filter_abs(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("abs", args, {}));
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) return make_error("integer overflow in abs()");
    return Value::integer(std::llabs(v.as_int()));
  }
  if (v.is_float()) return Value::number(std::fabs(v.as_float()));
  if (v.is_undefined()) return undefined_error(v);
  return make_error("bad operand type for abs(): '{}'", type_name(v));
}

Expected<Value> filter_attr(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments("attr", args, {{"name", std::nullopt}}));
  if (!a[0].is_string()) return Value::undefined("attribute name must be a string");
  // Python's getattr only: unlike `x.name`, a dict's keys are not attributes here.
  if (v.is_dict()) {
    if (auto method = find_method(v, a[0].as_string())) return *method;
    return Value::undefined(fmt::format("'dict object' has no attribute '{}'", a[0].as_string()));
  }
  return in.get_attribute(v, a[0].as_string());
}

Expected<Value> filter_capitalize(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("capitalize", args, {}));
  return like(v, py_capitalize(py_str(v)));
}

Expected<Value> filter_default(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(
      auto a, bind_arguments("default", args, {{"default_value", kEmpty}, {"boolean", kFalse}}));
  if (v.is_undefined() || (truthy(a[1]) && !truthy(v))) return a[0];
  return v;
}

Expected<Value> filter_dictsort(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(
      auto a,
      bind_arguments("dictsort", args,
                     {{"case_sensitive", kFalse}, {"by", text("key")}, {"reverse", kFalse}}));
  if (!v.is_dict()) return make_error("dictsort needs a mapping, not {}", type_name(v));
  if (!a[1].is_string() || (a[1].as_string() != "key" && a[1].as_string() != "value")) {
    return make_error("You can only sort by either \"key\" or \"value\"");
  }
  const bool by_value = a[1].as_string() == "value";
  std::vector<Value> pairs;
  std::vector<Value> keys;
  for (const auto& [key, value] : v.as_dict().entries()) {
    pairs.push_back(Value::list({key, value}, ListKind::kTuple));
    const Value sort_key = by_value ? value : key;
    keys.push_back(truthy(a[0]) ? sort_key : ignore_case(sort_key));
  }
  DRIFT_ASSIGN_OR_RETURN(std::vector<size_t> order, sorted_order(keys, truthy(a[2])));
  std::vector<Value> sorted;
  for (size_t i : order) sorted.push_back(pairs[i]);
  return in.make_list(std::move(sorted));
}

Expected<Value> filter_escape(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("escape", args, {}));
  if (v.is_markup()) return v;
  std::string out = html_escape(py_str(v));
  DRIFT_RETURN_IF_ERROR(in.check_size(out.size()));
  return Value::markup(std::move(out));
}

Expected<Value> filter_first(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("first", args, {}));
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Expected<Value> filter_last(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("last", args, {}));
  if (v.is_list() && v.as_list().kind == ListKind::kGenerator) {
    return make_error("'generator' object is not reversible");
  }
  if (v.is_undefined()) return undefined_error(v);
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

// Python's float(str): surrounding whitespace, underscores between digits, inf/nan.
std::optional<double> parse_py_float(std::string_view s) {
  const std::string trimmed = strip(s, true, true, nullptr);
  std::string clean;
  for (size_t i = 0; i < trimmed.size(); ++i) {
    const char c = trimmed[i];
    if (c == '_') {
      const bool between_digits = i > 0 && i + 1 < trimmed.size() &&
                                  std::isdigit(static_cast<unsigned char>(trimmed[i - 1])) &&
                                  std::isdigit(static_cast<unsigned char>(trimmed[i + 1]));
      if (!between_digits) return std::nullopt;
      continue;
    }
    clean.push_back(c);
  }
  if (clean.empty()) return std::nullopt;
  const std::string lowered = lower(clean);
  std::string_view body = lowered;
  bool negative = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body == "inf" || body == "infinity") return negative ? -INFINITY : INFINITY;
  if (body == "nan") return NAN;
  // Digits, at most one point, optional exponent: what strtod accepts minus hex and words.
  for (char c : body) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' ||
          c == '-')) {
      return std::nullopt;
    }
  }
  char* end = nullptr;
  const double value = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return value;
}

// Python's int(str, base) for bases 2..36 (and 0: prefix decides).
std::optional<int64_t> parse_py_int(std::string_view s, int64_t base) {
  std::string t = strip(s, true, true, nullptr);
  bool negative = false;
  size_t i = 0;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) negative = t[i++] == '-';
  auto has_prefix = [&](char p) {
    return i + 1 < t.size() && t[i] == '0' && (t[i + 1] | 0x20) == p;
  };
  if ((base == 16 || base == 0) && has_prefix('x')) {
    base = 16, i += 2;
  } else if ((base == 8 || base == 0) && has_prefix('o')) {
    base = 8, i += 2;
  } else if ((base == 2 || base == 0) && has_prefix('b')) {
    base = 2, i += 2;
  } else if (base == 0) {
    base = 10;
  }
  if (base < 2 || base > 36 || i >= t.size()) return std::nullopt;
  uint64_t magnitude = 0;
  bool any = false;
  for (; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '_' && any && i + 1 < t.size() && t[i + 1] != '_') continue;
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') {
      digit = (c | 0x20) - 'a' + 10;
    } else {
      return std::nullopt;
    }
    if (digit >= base) return std::nullopt;
    if (__builtin_mul_overflow(magnitude, static_cast<uint64_t>(base), &magnitude) ||
        __builtin_add_overflow(magnitude, static_cast<uint64_t>(digit), &magnitude)) {
      return std::nullopt;
    }
    any = true;
  }
  if (!any) return std::nullopt;
  if (negative) {
    if (magnitude > static_cast<uint64_t>(INT64_MAX) + 1) return std::nullopt;
    return magnitude == static_cast<uint64_t>(INT64_MAX) + 1 ? INT64_MIN
                                                             : -static_cast<int64_t>(magnitude);
  }
  if (magnitude > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return static_cast<int64_t>(magnitude);
}

std::optional<int64_t> float_to_int(double f) {
  if (!std::isfinite(f) || f >= 9223372036854775808.0 || f < -9223372036854775808.0) {
    return std::nullopt;
  }
  return static_cast<int64_t>(std::trunc(f));
}

Expected<Value> filter_float(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments("float", args, {{"default", Value::number(0.0)}}));
  if (v.is_undefined()) return undefined_error(v);
  if (v.is_number()) return Value::number(v.as_float());
  if (v.is_string()) {
    if (auto f = parse_py_float(v.as_string())) return Value::number(*f);
  }
  return a[0];
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

Expected<Value> filter_int(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(
      auto a,
      bind_arguments("int", args, {{"default", Value::integer(0)}, {"base", Value::integer(10)}}));
  if (v.is_undefined()) return undefined_error(v);
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is_float()) {
    if (auto i = float_to_int(v.as_float())) return Value::integer(*i);
    return a[0];
  }
  if (v.is_string()) {
    const int64_t base = a[1].is_integral() ? a[1].as_int() : 10;
    if (auto i = parse_py_int(v.as_string(), base)) return Value::integer(*i);
    if (auto f = parse_py_float(v.as_string())) {  // "42.23"|int is 42
      if (auto i = float_to_int(*f)) return Value::integer(*i);
    }
  }
  return a[0];
}

Expected<Value> filter_items(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("items", args, {}));
  if (v.is_undefined()) return in.make_list({}, ListKind::kGenerator);
  if (!v.is_dict()) return make_error("Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  for (const auto& [key, value] : v.as_dict().entries()) {
    pairs.push_back(Value::list({key, value}, ListKind::kTuple));
  }
  return in.make_list(std::move(pairs), ListKind::kGenerator);
}

Expected<Value> filter_join(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a,
                         bind_arguments("join", args, {{"d", kEmpty}, {"attribute", kNone}}));
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  const std::string separator = py_str(a[0]);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += separator;
    DRIFT_ASSIGN_OR_RETURN(Value item, attribute_path(in, items[i], a[1]));
    append_py_str(out, item);
    DRIFT_RETURN_IF_ERROR(in.check_size(out.size()));
  }
  return text(std::move(out));
}

Expected<Value> filter_length(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("length", args, {}));
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return Value::integer(0);
    case Value::Kind::kString:
      return Value::integer(static_cast<int64_t>(utf8_length(v.as_string())));
    case Value::Kind::kList:
      if (v.as_list().kind == ListKind::kGenerator) break;
      return Value::integer(static_cast<int64_t>(v.as_list().items.size()));
    case Value::Kind::kDict:
      return Value::integer(static_cast<int64_t>(v.as_dict().size()));
    case Value::Kind::kLoop:
      return Value::integer(static_cast<int64_t>(v.as_loop().items->items.size()));
    default:
      break;
  }
  return make_error("object of type '{}' has no len()", type_name(v));
}

Expected<Value> filter_list(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("list", args, {}));
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  return in.make_list(std::move(items));
}

Expected<Value> filter_lower(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("lower", args, {}));
  return like(v, lower(py_str(v)));
}

Expected<Value> filter_upper(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("upper", args, {}));
  return like(v, upper(py_str(v)));
}

Expected<Value> filter_map(Interpreter& in, const Value& v, CallArgs& args) {
  std::vector<Value> out;
  if (!truthy(v)) return in.make_list({}, ListKind::kGenerator);
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  if (args.positional.empty()) {
    Value attribute, default_value = kNone;
    bool has_attribute = false;
    for (const auto& [name, value] : args.keywords) {
      if (name == "attribute") {
        attribute = value;
        has_attribute = true;
      } else if (name == "default") {
        default_value = value;
      } else {
        return make_error("Unexpected keyword argument '{}'", name);
      }
    }
    if (!has_attribute) return make_error("map requires a filter argument");
    for (const Value& item : items) {
      DRIFT_ASSIGN_OR_RETURN(Value mapped, attribute_path(in, item, attribute));
      if (mapped.is_undefined() && !default_value.is_none()) mapped = default_value;
      out.push_back(std::move(mapped));
    }
    return in.make_list(std::move(out), ListKind::kGenerator);
  }
  if (!args.positional[0].is_string()) return make_error("map: the filter name must be a string");
  const std::string name = args.positional[0].as_string();
  for (const Value& item : items) {
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keywords = args.keywords;
    DRIFT_ASSIGN_OR_RETURN(Value mapped, in.apply_filter(name, item, rest));
    out.push_back(std::move(mapped));
  }
  return in.make_list(std::move(out), ListKind::kGenerator);
}

Expected<Value> min_or_max(Interpreter& in, const Value& v, CallArgs& args, bool want_max) {
  DRIFT_ASSIGN_OR_RETURN(auto a,
                         bind_arguments(want_max ? "max" : "min", args,
                                        {{"case_sensitive", kFalse}, {"attribute", kNone}}));
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items.size(); ++i) {
    DRIFT_ASSIGN_OR_RETURN(Value key, attribute_path(in, items[i], a[1]));
    if (!truthy(a[0])) key = ignore_case(key);
    if (i == 0) {
      best_key = key;
      continue;
    }
    DRIFT_ASSIGN_OR_RETURN(int order, compare(key, best_key));
    if (want_max ? order > 0 : order < 0) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}

Expected<Value> filter_max(Interpreter& in, const Value& v, CallArgs& args) {
  return min_or_max(in, v, args, true);
}
Expected<Value> filter_min(Interpreter& in, const Value& v, CallArgs& args) {
  return min_or_max(in, v, args, false);
}

// select / reject / selectattr / rejectattr.
Expected<Value> select_or_reject(Interpreter& in, const Value& v, CallArgs& args, bool select,
                                 bool by_attribute) {
  if (!truthy(v)) return in.make_list({}, ListKind::kGenerator);
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  size_t next = 0;
  Value attribute = kNone;
  if (by_attribute) {
    if (args.positional.empty()) return make_error("Missing parameter for attribute name");
    attribute = args.positional[next++];
  }
  std::optional<std::string> test;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) return make_error("test name must be a string");
    test = args.positional[next++].as_string();
  }
  std::vector<Value> kept;
  for (const Value& item : items) {
    DRIFT_ASSIGN_OR_RETURN(Value probe, attribute_path(in, item, attribute));
    bool passed;
    if (test) {
      CallArgs test_args;
      test_args.positional.assign(args.positional.begin() + static_cast<ptrdiff_t>(next),
                                  args.positional.end());
      test_args.keywords = args.keywords;
      DRIFT_ASSIGN_OR_RETURN(passed, in.apply_test(*test, probe, test_args));
    } else {
      passed = truthy(probe);
    }
    if (passed == select) kept.push_back(item);
  }
  return in.make_list(std::move(kept), ListKind::kGenerator);
}

Expected<Value> filter_select(Interpreter& in, const Value& v, CallArgs& args) {
  return select_or_reject(in, v, args, true, false);
}
Expected<Value> filter_reject(Interpreter& in, const Value& v, CallArgs& args) {
  return select_or_reject(in, v, args, false, false);
}
Expected<Value> filter_selectattr(Interpreter& in, const Value& v, CallArgs& args) {
  return select_or_reject(in, v, args, true, true);
}
Expected<Value> filter_rejectattr(Interpreter& in, const Value& v, CallArgs& args) {
  return select_or_reject(in, v, args, false, true);
}

Expected<Value> filter_replace(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(
      auto a, bind_arguments("replace", args,
                             {{"old", std::nullopt}, {"new", std::nullopt}, {"count", kNone}}));
  const int64_t count = a[2].is_integral() ? a[2].as_int() : -1;
  auto out = py_replace(py_str(v), py_str(a[0]), py_str(a[1]), count, in.limits().max_output_bytes);
  if (!out)
    return make_error("replace() would build a string over the limit of {} bytes",
                      in.limits().max_output_bytes);
  return text(std::move(*out));
}

Expected<Value> filter_reverse(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("reverse", args, {}));
  if (v.is_string()) {
    std::u32string points = utf8_decode(v.as_string());
    std::reverse(points.begin(), points.end());
    return text(utf8_encode(points));
  }
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  std::reverse(items.begin(), items.end());
  // reversed() gives an iterator, not a list.
  return in.make_list(std::move(items), ListKind::kGenerator);
}

// Python's round(x, ndigits) for floats: correctly rounded, ties to even on the exact binary
// value, which glibc's printf also implements.
double round_float(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits >= 0) {
    if (digits > 300) return x;
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(digits), x);
    return std::strtod(buf, nullptr);
  }
  if (digits < -308) return std::copysign(0.0, x);
  const double scale = std::pow(10.0, static_cast<double>(-digits));
  return std::nearbyint(x / scale) * scale;
}

Expected<Value> filter_round(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(
      auto a, bind_arguments("round", args,
                             {{"precision", Value::integer(0)}, {"method", text("common")}}));
  const std::string method = a[1].is_string() ? a[1].as_string() : "";
  if (method != "common" && method != "ceil" && method != "floor") {
    return make_error("method must be common, ceil or floor");
  }
  if (v.is_undefined()) return undefined_error(v);
  if (!v.is_number()) return make_error("type {} doesn't define __round__ method", type_name(v));
  if (!a[0].is_integral()) {
    return make_error("'{}' object cannot be interpreted as an integer", type_name(a[0]));
  }
  const int64_t precision = a[0].as_int();
  if (method == "common") {
    if (v.is_integral() && precision >= 0) return Value::integer(v.as_int());
    return Value::number(round_float(v.as_float(), precision));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double scaled = v.as_float() * scale;
  return Value::number((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
}

Expected<Value> filter_safe(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("safe", args, {}));
  return v.is_markup() ? v : Value::markup(py_str(v));
}

Expected<Value> filter_sort(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(
      auto a,
      bind_arguments("sort", args,
                     {{"reverse", kFalse}, {"case_sensitive", kFalse}, {"attribute", kNone}}));
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  // attribute may list several, comma-separated: the key is then a tuple.
  std::vector<Value> attributes;
  if (a[2].is_string()) {
    for (const std::string& part : py_split(a[2].as_string(), std::string(","), -1, false)) {
      attributes.push_back(text(part));
    }
  } else {
    attributes.push_back(a[2]);
  }
  std::vector<Value> keys;
  for (const Value& item : items) {
    std::vector<Value> parts;
    for (const Value& attribute : attributes) {
      DRIFT_ASSIGN_OR_RETURN(Value key, attribute_path(in, item, attribute));
      parts.push_back(truthy(a[1]) ? key : ignore_case(key));
    }
    keys.push_back(parts.size() == 1 ? parts[0] : Value::list(std::move(parts), ListKind::kTuple));
  }
  DRIFT_RETURN_IF_ERROR(in.charge(items.size() * 8));  // n log n comparisons, roughly
  DRIFT_ASSIGN_OR_RETURN(std::vector<size_t> order, sorted_order(keys, truthy(a[0])));
  std::vector<Value> sorted;
  for (size_t i : order) sorted.push_back(items[i]);
  return in.make_list(std::move(sorted));
}

Expected<Value> filter_string(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("string", args, {}));
  if (v.is_string()) return v;
  DRIFT_ASSIGN_OR_RETURN(std::string s, to_str_checked(in, v));
  return text(std::move(s));
}

Expected<Value> filter_sum(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(
      auto a, bind_arguments("sum", args, {{"attribute", kNone}, {"start", Value::integer(0)}}));
  if (a[1].is_string()) return make_error("sum() can't sum strings [use ''.join(seq) instead]");
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  Value total = a[1];
  for (const Value& item : items) {
    DRIFT_ASSIGN_OR_RETURN(Value term, attribute_path(in, item, a[0]));
    DRIFT_ASSIGN_OR_RETURN(total, binary_operation(BinaryOp::kAdd, total, term, in.limits()));
  }
  return total;
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
  const std::u32string chars = utf8_decode(a[0].as_string());
  return like(v, strip(py_str(v), true, true, &chars));
}

// A hashable identity for unique(): equal values (1, 1.0, True) share one.
Expected<std::string> hash_key(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString:
      return "s" + v.as_string();
    case Value::Kind::kBool:
    case Value::Kind::kInt:
      return "n" + std::to_string(v.as_int());
    case Value::Kind::kFloat: {
      const double f = v.as_float();
      if (std::trunc(f) == f && std::fabs(f) < 9.2e18) {
        return "n" + std::to_string(static_cast<int64_t>(f));
      }
      return "f" + py_float_repr(f);
    }
    case Value::Kind::kNone:
      return std::string("none");
    case Value::Kind::kList:
      if (v.as_list().kind == ListKind::kTuple) {
        std::string key = "t(";
        for (const Value& item : v.as_list().items) {
          DRIFT_ASSIGN_OR_RETURN(std::string part, hash_key(item));
          key += std::to_string(part.size()) + ":" + part;
        }
        return key + ")";
      }
      break;
    case Value::Kind::kDict:
      break;
    default:
      return fmt::format("o{}", static_cast<int>(v.kind()));
  }
  return make_error("unhashable type: '{}'", type_name(v));
}

Expected<Value> filter_unique(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(
      auto a, bind_arguments("unique", args, {{"case_sensitive", kFalse}, {"attribute", kNone}}));
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  std::unordered_set<std::string> seen;
  std::vector<Value> kept;
  for (const Value& item : items) {
    DRIFT_ASSIGN_OR_RETURN(Value key, attribute_path(in, item, a[1]));
    if (!truthy(a[0])) key = ignore_case(key);
    DRIFT_ASSIGN_OR_RETURN(std::string hashed, hash_key(key));
    if (seen.insert(std::move(hashed)).second) kept.push_back(item);
  }
  return in.make_list(std::move(kept), ListKind::kGenerator);
}

Expected<Value> filter_wordcount(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("wordcount", args, {}));
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(py_str(v))) {
    const bool word_char = c == '_' || py_isalpha(c) || py_isdigit(c);
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value::integer(words);
}

struct NamedFilter {
  std::string_view name;
  FilterFunction function;
};

constexpr NamedFilter kFilters[] = {
    {"abs", filter_abs},
    {"attr", filter_attr},
    {"capitalize", filter_capitalize},
    {"count", filter_length},
    {"d", filter_default},
    {"default", filter_default},
    {"dictsort", filter_dictsort},
    {"e", filter_escape},
    {"escape", filter_escape},
    {"first", filter_first},
    {"float", filter_float},
    {"format", filter_format},
    {"indent", filter_indent},
    {"int", filter_int},
    {"items", filter_items},
    {"join", filter_join},
    {"last", filter_last},
    {"length", filter_length},
    {"list", filter_list},
    {"lower", filter_lower},
    {"map", filter_map},
    {"max", filter_max},
    {"min", filter_min},
    {"reject", filter_reject},
    {"rejectattr", filter_rejectattr},
    {"replace", filter_replace},
    {"reverse", filter_reverse},
    {"round", filter_round},
    {"safe", filter_safe},
    {"select", filter_select},
    {"selectattr", filter_selectattr},
    {"sort", filter_sort},
    {"string", filter_string},
    {"sum", filter_sum},
    {"title", filter_title},
    {"tojson", filter_tojson},
    {"trim", filter_trim},
    {"unique", filter_unique},
    {"upper", filter_upper},
    {"wordcount", filter_wordcount},
};

}  // namespace

FilterFunction find_filter(std::string_view name) {
  for (const NamedFilter& f : kFilters) {
    if (f.name == name) return f.function;
  }
  return nullptr;
}

}  // namespace drift::jinja
