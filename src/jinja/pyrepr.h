// Python's text forms of values, which decide what `{{ value }}` prints: str() for output and
// the `string` filter, repr() for items inside containers, and the float repr both rely on.
#pragma once

#include <string>
#include <string_view>

#include "jinja/value.h"

namespace drift::jinja {

// Python's repr(float): the shortest digits that round-trip, in fixed notation when
// 1e-4 <= |x| < 1e16 (always with a fractional part, "1.0") and otherwise in exponent notation
// with at least two exponent digits ("1e-05", "1.5e+16"); "inf", "-inf", "nan".
std::string py_float_repr(double x);

// Python's repr(str): single quotes unless the text contains ' and no ", backslash escapes for
// the quote, backslash, \t \n \r and for non-printable code points.
std::string py_string_repr(std::string_view text);

// Python's str(value) as jinja2 prints it: strings unchanged, undefined as "", None as "None",
// True/False, containers as the repr of their items.
std::string py_str(const Value& v);
void append_py_str(std::string& out, const Value& v);

// Python's repr(value).
std::string py_repr(const Value& v);
void append_py_repr(std::string& out, const Value& v);

}  // namespace drift::jinja
