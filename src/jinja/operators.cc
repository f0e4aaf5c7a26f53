#include "jinja/operators.h"

#include <fmt/format.h>

#include <cmath>

#include "jinja/error_kind.h"
#include "jinja/pyformat.h"
#include "jinja/pyrepr.h"
#include "jinja/pystring.h"

namespace drift::jinja {
namespace {

constexpr std::string_view kOverflow =
    "integer overflow: the result does not fit in 64 bits (drift's template integers are 64-bit)";

std::string_view symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSubtract:
      return "-";
    case BinaryOp::kMultiply:
      return "*";
    case BinaryOp::kDivide:
      return "/";
    case BinaryOp::kFloorDivide:
      return "//";
    case BinaryOp::kModulo:
      return "%";
    case BinaryOp::kPower:
      return "** or pow()";
  }
  return "?";
}

Error unsupported(BinaryOp op, const Value& a, const Value& b) {
  return make_error("unsupported operand type(s) for {}: '{}' and '{}'", symbol(op), type_name(a),
                    type_name(b));
}

// Python's float floor division and modulo (divmod), with the sign of the divisor.
std::pair<double, double> float_divmod(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) {
      mod += b;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, b);
  }
  double floordiv;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, a / b);
  }
  return {floordiv, mod};
}

Expected<Value> integer_power(int64_t base, int64_t exponent) {
  int64_t result = 1;
  int64_t factor = base;
  while (exponent > 0) {
    if (exponent & 1) {
      if (__builtin_mul_overflow(result, factor, &result)) return Error{std::string(kOverflow)};
    }
    exponent >>= 1;
    if (exponent > 0 && __builtin_mul_overflow(factor, factor, &factor)) {
      return Error{std::string(kOverflow)};
    }
  }
  return Value::integer(result);
}

Expected<Value> repeat_string(const Value& v, int64_t count, const RenderLimits& limits) {
  const std::string& s = v.as_string();
  auto result = [&](std::string text) {
    return v.is_markup() ? Value::markup(std::move(text)) : Value::string(std::move(text));
  };
  if (count <= 0 || s.empty()) return result("");
  if (static_cast<uint64_t>(count) > limits.max_output_bytes / s.size()) {
    return make_kind_error(
        ErrorKind::kLimit,
        "string repetition would build {} x {} bytes, over the limit of {} bytes", count, s.size(),
        limits.max_output_bytes);
  }
  std::string out;
  out.reserve(s.size() * static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out += s;
  return result(std::move(out));
}

Expected<Value> repeat_list(const List& list, int64_t count, const RenderLimits& limits) {
  if (count <= 0 || list.items.empty()) return Value::list({}, list.kind);
  if (static_cast<uint64_t>(count) > static_cast<uint64_t>(limits.max_range) / list.items.size()) {
    return make_kind_error(ErrorKind::kLimit, "list repetition would build more than {} items",
                           limits.max_range);
  }
  std::vector<Value> items;
  items.reserve(list.items.size() * static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    items.insert(items.end(), list.items.begin(), list.items.end());
  return Value::list(std::move(items), list.kind);
}

bool is_sequence_list(const Value& v) {
  return v.is_list() && v.as_list().kind != ListKind::kGenerator;
}

Expected<Value> add(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    int64_t r;
    if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) return Error{std::string(kOverflow)};
    return Value::integer(r);
  }
  if (a.is_number() && b.is_number()) return Value::number(a.as_float() + b.as_float());
  if (a.is_string()) {
    if (!b.is_string()) {
      return make_error("can only concatenate str (not \"{}\") to str", type_name(b));
    }
    if (a.is_markup() || b.is_markup()) {  // Markup escapes the plain side
      auto safe = [](const Value& v) {
        return v.is_markup() ? v.as_string() : html_escape(v.as_string());
      };
      return Value::markup(safe(a) + safe(b));
    }
    return Value::string(a.as_string() + b.as_string());
  }
  if (is_sequence_list(a)) {
    if (!is_sequence_list(b) || a.as_list().kind != b.as_list().kind) {
      return make_error("can only concatenate {} (not \"{}\") to {}", type_name(a), type_name(b),
                        type_name(a));
    }
    std::vector<Value> items = a.as_list().items;
    items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
    return Value::list(std::move(items), a.as_list().kind);
  }
  return unsupported(BinaryOp::kAdd, a, b);
}

Expected<Value> multiply(const Value& a, const Value& b, const RenderLimits& limits) {
  if (a.is_integral() && b.is_integral()) {
    int64_t r;
    if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) return Error{std::string(kOverflow)};
    return Value::integer(r);
  }
  if (a.is_number() && b.is_number()) return Value::number(a.as_float() * b.as_float());
  if (a.is_string() && b.is_integral()) return repeat_string(a, b.as_int(), limits);
  if (b.is_string() && a.is_integral()) return repeat_string(b, a.as_int(), limits);
  if (is_sequence_list(a) && b.is_integral()) return repeat_list(a.as_list(), b.as_int(), limits);
  if (is_sequence_list(b) && a.is_integral()) return repeat_list(b.as_list(), a.as_int(), limits);
  if ((a.is_string() || a.is_list()) && b.is_number()) {
    return make_error("can't multiply sequence by non-int of type '{}'", type_name(b));
  }
  return unsupported(BinaryOp::kMultiply, a, b);
}

// Markup % args escapes the arguments that are not Markup themselves.
Value escape_arguments(const Value& args) {
  auto escape = [](const Value& v) {
    if (v.is_markup() || v.is_number() || v.is_none()) return v;
    return Value::markup(html_escape(py_str(v)));
  };
  if (args.is_list() && args.as_list().kind == ListKind::kTuple) {
    std::vector<Value> items;
    for (const Value& item : args.as_list().items) items.push_back(escape(item));
    return Value::list(std::move(items), ListKind::kTuple);
  }
  if (args.is_dict()) {
    Dict escaped;
    for (const auto& [key, value] : args.as_dict().entries()) escaped.set(key, escape(value));
    return Value::dict(std::move(escaped));
  }
  return escape(args);
}

Expected<Value> modulo(const Value& a, const Value& b) {
  if (a.is_markup()) {
    DRIFT_ASSIGN_OR_RETURN(std::string formatted,
                           percent_format(a.as_string(), escape_arguments(b)));
    return Value::markup(std::move(formatted));
  }
  if (a.is_string()) {
    DRIFT_ASSIGN_OR_RETURN(std::string formatted, percent_format(a.as_string(), b));
    return Value::string(std::move(formatted));
  }
  if (!a.is_number() || !b.is_number()) return unsupported(BinaryOp::kModulo, a, b);
  if (a.is_integral() && b.is_integral()) {
    const int64_t x = a.as_int(), y = b.as_int();
    if (y == 0) return make_error("integer modulo by zero");
    if (y == -1) return Value::integer(0);  // avoids INT64_MIN % -1
    int64_t r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return Value::integer(r);
  }
  if (b.as_float() == 0) return make_error("float modulo");
  return Value::number(float_divmod(a.as_float(), b.as_float()).second);
}

Expected<Value> floor_divide(const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) return unsupported(BinaryOp::kFloorDivide, a, b);
  if (a.is_integral() && b.is_integral()) {
    const int64_t x = a.as_int(), y = b.as_int();
    if (y == 0) return make_error("integer division or modulo by zero");
    if (x == INT64_MIN && y == -1) return Error{std::string(kOverflow)};
    int64_t q = x / y;
    if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
    return Value::integer(q);
  }
  if (b.as_float() == 0) return make_error("float floor division by zero");
  return Value::number(float_divmod(a.as_float(), b.as_float()).first);
}

Expected<Value> power(const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) return unsupported(BinaryOp::kPower, a, b);
  if (a.is_integral() && b.is_integral() && b.as_int() >= 0) {
    return integer_power(a.as_int(), b.as_int());
  }
  const double x = a.as_float(), y = b.as_float();
  if (x == 0 && y < 0) return make_error("0.0 cannot be raised to a negative power");
  if (x < 0 && std::trunc(y) != y) {
    return make_error(
        "a negative number to a fractional power is complex, which templates "
        "do not support");
  }
  const double r = std::pow(x, y);
  if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) {
    return make_error("(34, 'Numerical result out of range')");
  }
  return Value::number(r);
}

}  // namespace

Error undefined_error(const Value& undefined) {
  const std::string& hint = undefined.undefined_hint();
  return Error{hint.empty() ? std::string("undefined value") : hint};
}

std::string object_description(const Value& v) {
  if (v.is_none()) return "None";
  return fmt::format("{} object", type_name(v));
}

Expected<Value> binary_operation(BinaryOp op, const Value& a, const Value& b,
                                 const RenderLimits& limits) {
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  switch (op) {
    case BinaryOp::kAdd:
      return add(a, b);
    case BinaryOp::kSubtract:
      if (a.is_integral() && b.is_integral()) {
        int64_t r;
        if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r))
          return Error{std::string(kOverflow)};
        return Value::integer(r);
      }
      if (a.is_number() && b.is_number()) return Value::number(a.as_float() - b.as_float());
      return unsupported(op, a, b);
    case BinaryOp::kMultiply:
      return multiply(a, b, limits);
    case BinaryOp::kDivide:
      if (!a.is_number() || !b.is_number()) return unsupported(op, a, b);
      if (b.as_float() == 0) return make_error("division by zero");
      return Value::number(a.as_float() / b.as_float());
    case BinaryOp::kFloorDivide:
      return floor_divide(a, b);
    case BinaryOp::kModulo:
      return modulo(a, b);
    case BinaryOp::kPower:
      return power(a, b);
  }
  return unsupported(op, a, b);
}

Expected<Value> unary_operation(ExprKind kind, const Value& v) {
  if (v.is_undefined()) return undefined_error(v);
  const bool negate = kind == ExprKind::kNegate;
  if (v.is_integral()) {
    if (!negate) return Value::integer(v.as_int());
    if (v.as_int() == INT64_MIN) return Error{std::string(kOverflow)};
    return Value::integer(-v.as_int());
  }
  if (v.is_float()) return Value::number(negate ? -v.as_float() : v.as_float());
  return make_error("bad operand type for unary {}: '{}'", negate ? "-" : "+", type_name(v));
}

Expected<bool> contains(const Value& container, const Value& needle) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;  // iterating undefined yields nothing
    case Value::Kind::kString:
      if (!needle.is_string()) {
        return make_error("'in <string>' requires string as left operand, not {}",
                          type_name(needle));
      }
      return container.as_string().find(needle.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& item : container.as_list().items) {
        if (equals(item, needle)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (needle.is_list() || needle.is_dict()) {
        return make_error("unhashable type: '{}'", type_name(needle));
      }
      return container.as_dict().find(needle) != nullptr;
    default:
      return make_error("argument of type '{}' is not iterable", type_name(container));
  }
}

}  // namespace drift::jinja
