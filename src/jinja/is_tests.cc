// jinja2's builtin tests (`x is defined`, `n is odd`, `x is mapping`, ...), answering as the
// Python implementation does for every value kind (a dict is a sequence; undefined is iterable).
#include <fmt/format.h>

#include "jinja/builtins.h"
#include "jinja/interpreter.h"
#include "jinja/operators.h"
#include "jinja/pyrepr.h"
#include "jinja/pystring.h"

namespace drift::jinja {
namespace {

Expected<Value> one_argument(std::string_view test, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments(test, args, {{"other", std::nullopt}}));
  return a[0];
}

Expected<bool> no_arguments(std::string_view test, CallArgs& args, bool result) {
  DRIFT_RETURN_IF_ERROR(bind_arguments(test, args, {}));
  return result;
}

Expected<bool> test_defined(Interpreter&, const Value& v, CallArgs& args) {
  return no_arguments("defined", args, !v.is_undefined());
}
Expected<bool> test_undefined(Interpreter&, const Value& v, CallArgs& args) {
  return no_arguments("undefined", args, v.is_undefined());
}
Expected<bool> test_none(Interpreter&, const Value& v, CallArgs& args) {
  return no_arguments("none", args, v.is_none());
}
Expected<bool> test_boolean(Interpreter&, const Value& v, CallArgs& args) {
  return no_arguments("boolean", args, v.is_bool());
}
Expected<bool> test_true(Interpreter&, const Value& v, CallArgs& args) {
  return no_arguments("true", args, v.is_bool() && v.as_bool());
}
Expected<bool> test_false(Interpreter&, const Value& v, CallArgs& args) {
  return no_arguments("false", args, v.is_bool() && !v.as_bool());
}
Expected<bool> test_integer(Interpreter&, const Value& v, CallArgs& args) {
  return no_arguments("integer", args, v.is_int());
}
Expected<bool> test_float(Interpreter&, const Value& v, CallArgs& args) {
  return no_arguments("float", args, v.is_float());
}
Expected<bool> test_number(Interpreter&, const Value& v, CallArgs& args) {
  return no_arguments("number", args, v.is_number());
}
Expected<bool> test_string(Interpreter&, const Value& v, CallArgs& args) {
  return no_arguments("string", args, v.is_string());
}
Expected<bool> test_mapping(Interpreter&, const Value& v, CallArgs& args) {
  return no_arguments("mapping", args, v.is_dict());
}
// Anything with len() and [] (so dicts and undefined too, but not generators).
Expected<bool> test_sequence(Interpreter&, const Value& v, CallArgs& args) {
  const bool sequence = v.is_undefined() || v.is_string() || v.is_dict() ||
                        (v.is_list() && v.as_list().kind != ListKind::kGenerator);
  return no_arguments("sequence", args, sequence);
}
// Anything iter() accepts.
Expected<bool> test_iterable(Interpreter&, const Value& v, CallArgs& args) {
  const bool iterable =
      v.is_undefined() || v.is_string() || v.is_list() || v.is_dict() || v.is_loop();
  return no_arguments("iterable", args, iterable);
}
Expected<bool> test_callable(Interpreter&, const Value& v, CallArgs& args) {
  return no_arguments("callable", args, v.is_function() || v.is_undefined());
}
Expected<bool> test_escaped(Interpreter&, const Value&, CallArgs& args) {
  return no_arguments("escaped", args, false);
}
Expected<bool> test_lower(Interpreter&, const Value& v, CallArgs& args) {
  return no_arguments("lower", args, py_islower_text(py_str(v)));
}
Expected<bool> test_upper(Interpreter&, const Value& v, CallArgs& args) {
  return no_arguments("upper", args, py_isupper_text(py_str(v)));
}

Expected<bool> parity(Interpreter& in, const Value& v, CallArgs& args, std::string_view name,
                      int64_t remainder) {
  DRIFT_RETURN_IF_ERROR(bind_arguments(name, args, {}));
  DRIFT_ASSIGN_OR_RETURN(Value r,
                         binary_operation(BinaryOp::kModulo, v, Value::integer(2), in.limits()));
  return equals(r, Value::integer(remainder));
}
Expected<bool> test_odd(Interpreter& in, const Value& v, CallArgs& args) {
  return parity(in, v, args, "odd", 1);
}
Expected<bool> test_even(Interpreter& in, const Value& v, CallArgs& args) {
  return parity(in, v, args, "even", 0);
}
Expected<bool> test_divisibleby(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments("divisibleby", args, {{"num", std::nullopt}}));
  DRIFT_ASSIGN_OR_RETURN(Value r, binary_operation(BinaryOp::kModulo, v, a[0], in.limits()));
  return equals(r, Value::integer(0));
}

Expected<bool> test_eq(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(Value other, one_argument("eq", args));
  return equals(v, other);
}
Expected<bool> test_ne(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(Value other, one_argument("ne", args));
  return !equals(v, other);
}

Expected<bool> ordered(const Value& v, CallArgs& args, std::string_view name, bool (*holds)(int)) {
  DRIFT_ASSIGN_OR_RETURN(Value other, one_argument(name, args));
  if (v.is_undefined()) return undefined_error(v);
  if (other.is_undefined()) return undefined_error(other);
  DRIFT_ASSIGN_OR_RETURN(int order, compare(v, other));
  return holds(order);
}
Expected<bool> test_lt(Interpreter&, const Value& v, CallArgs& args) {
  return ordered(v, args, "lt", [](int o) { return o < 0; });
}
Expected<bool> test_le(Interpreter&, const Value& v, CallArgs& args) {
  return ordered(v, args, "le", [](int o) { return o <= 0; });
}
Expected<bool> test_gt(Interpreter&, const Value& v, CallArgs& args) {
  return ordered(v, args, "gt", [](int o) { return o > 0; });
}
Expected<bool> test_ge(Interpreter&, const Value& v, CallArgs& args) {
  return ordered(v, args, "ge", [](int o) { return o >= 0; });
}

Expected<bool> test_in(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments("in", args, {{"seq", std::nullopt}}));
  return contains(a[0], v);
}

// Python's `is`: None, booleans and the same object; equal small values count as identical
// (CPython shares them), larger numbers and strings compare by value here.
Expected<bool> test_sameas(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(Value other, one_argument("sameas", args));
  if (v.kind() != other.kind()) return false;
  switch (v.kind()) {
    case Value::Kind::kNone:
    case Value::Kind::kUndefined:
      return v.is_none() || v.same_object(other);
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kString:
      return equals(v, other);
    default:
      return v.same_object(other);
  }
}

Expected<bool> test_filter(Interpreter&, const Value& v, CallArgs& args) {
  return no_arguments("filter", args, v.is_string() && find_filter(v.as_string()) != nullptr);
}
Expected<bool> test_test(Interpreter&, const Value& v, CallArgs& args) {
  return no_arguments("test", args, v.is_string() && find_test(v.as_string()) != nullptr);
}

struct NamedTest {
  std::string_view name;
  TestFunction function;
};

constexpr NamedTest kTests[] = {
    {"!=", test_ne},
    {"<", test_lt},
    {"<=", test_le},
    {"==", test_eq},
    {">", test_gt},
    {">=", test_ge},
    {"boolean", test_boolean},
    {"callable", test_callable},
    {"defined", test_defined},
    {"divisibleby", test_divisibleby},
    {"eq", test_eq},
    {"equalto", test_eq},
    {"escaped", test_escaped},
    {"even", test_even},
    {"false", test_false},
    {"filter", test_filter},
    {"float", test_float},
    {"ge", test_ge},
    {"greaterthan", test_gt},
    {"gt", test_gt},
    {"in", test_in},
    {"integer", test_integer},
    {"iterable", test_iterable},
    {"le", test_le},
    {"lessthan", test_lt},
    {"lower", test_lower},
    {"lt", test_lt},
    {"mapping", test_mapping},
    {"ne", test_ne},
    {"none", test_none},
    {"number", test_number},
    {"odd", test_odd},
    {"sameas", test_sameas},
    {"sequence", test_sequence},
    {"string", test_string},
    {"test", test_test},
    {"true", test_true},
    {"undefined", test_undefined},
    {"upper", test_upper},
};

}  // namespace

TestFunction find_test(std::string_view name) {
  for (const NamedTest& t : kTests) {
    if (t.name == name) return t.function;
  }
  return nullptr;
}

}  // namespace drift::jinja
