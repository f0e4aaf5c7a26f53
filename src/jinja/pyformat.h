// Python's two string formatting languages, as templates reach them: printf-style `fmt % args`
// (also the `format` filter) and str.format(). Both cover the conversions templates use; a
// specification outside that subset is an error rather than a silently different result.
#pragma once

#include <string>
#include <string_view>

#include "jinja/value.h"
#include "util/error.h"

namespace drift::jinja {

// `format % args`: a tuple spreads over the conversions, a dict feeds %(name)s conversions, any
// other value is the single argument. Supports flags -+ #0, width, precision (also *), and the
// conversions s r a d i u o x X e E f F g G c %.
Expected<std::string> percent_format(std::string_view format, const Value& args);

// `format.format(*positional, **keywords)`: {} {0} {name} fields with !s/!r/!a conversions and
// the format-spec mini-language [[fill]align][sign][#][0][width][.precision][type] for the
// types s d b o x X c e E f F g G % and none.
Expected<std::string> str_format(std::string_view format, const CallArgs& args);

}  // namespace drift::jinja
