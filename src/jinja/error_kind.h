// Why a template failed, as a kind a caller can branch on (drift::Error::code), because who is to
// blame differs: a chat server answers 400 when the template refuses the conversation
// (raise_exception) or the conversation outgrows the sandbox, and 500 when the template itself
// is broken (a syntax error, an undefined method, a division by zero), which only its operator
// can fix.
#pragma once

#include <fmt/format.h>

#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include "util/error.h"

namespace drift::jinja {

enum class ErrorKind {
  // 0 is "no error" for std::error_code.
  kSyntax = 1,        // the template does not parse
  kRuntime,           // rendering failed: a type error, an undefined callable, division by zero
  kRaised,            // the template called raise_exception(message): it refuses its inputs
  kLimit,             // a RenderLimits bound was reached (steps, output bytes, depth, range)
  kInvalidVariables,  // the variables given to render are not what a template can take
};

const std::error_category& error_category();
std::error_code make_error_code(ErrorKind kind);

// An Error of `kind` with a fmt-formatted message.
template <typename... Args>
Error make_kind_error(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  return Error{fmt::format(format, std::forward<Args>(args)...), make_error_code(kind)};
}

// `error` with `kind` unless it already has a kind (the innermost cause decides).
Error with_default_kind(Error error, ErrorKind kind);

}  // namespace drift::jinja

template <>
struct std::is_error_code_enum<drift::jinja::ErrorKind> : std::true_type {};
