// jinja2's filters on numbers: abs, float, int, round, with Python's parsing and rounding rules.
// Each follows the Python implementation on every value kind.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <unordered_set>

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

}  // namespace

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

Expected<Value> filter_float(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments("float", args, {{"default", Value::number(0.0)}}));
  if (v.is_undefined()) return undefined_error(v);
  if (v.is_number()) return Value::number(v.as_float());
  if (v.is_string()) {
    if (auto f = parse_py_float(v.as_string())) return Value::number(*f);
  }
  return a[0];
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

}  // namespace drift::jinja
