// Python's operators on template values: arithmetic with 64-bit overflow checks (jinja2 has
// arbitrary-precision integers; drift reports an error where they would grow past 64 bits),
// string and list concatenation and repetition, printf-style `%`, and `in`.
#pragma once

#include <string>

#include "jinja/ast.h"
#include "jinja/render_options.h"
#include "jinja/value.h"
#include "util/error.h"

namespace drift::jinja {

// `a op b`. Repetition results are checked against `limits` before they are built.
Expected<Value> binary_operation(BinaryOp op, const Value& a, const Value& b,
                                 const RenderLimits& limits);
// -v (kNegate) or +v (kPlus).
Expected<Value> unary_operation(ExprKind kind, const Value& v);
// `needle in container`.
Expected<bool> contains(const Value& container, const Value& needle);

// The error an operation on an undefined value fails with (its hint, as jinja2's
// UndefinedError says it).
Error undefined_error(const Value& undefined);
// How jinja2 names an object in "has no attribute" messages: 'dict object', 'None', ...
std::string object_description(const Value& v);

}  // namespace drift::jinja
