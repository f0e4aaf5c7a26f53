// Errors as values: anything that bad input can reach returns Expected<T> or Status with a
// message a user can act on. Exceptions are not thrown through the engine's layers.
#pragma once

#include <fmt/format.h>

#include <cassert>
#include <string>
#include <system_error>
#include <utility>
#include <variant>

namespace drift {

struct Error {
  std::string message;
  // The kind of failure, for a caller that must tell kinds apart without reading the message:
  // a library defines its kinds as an error-code enum (e.g. jinja::ErrorKind) and a caller
  // compares (`error.code == jinja::ErrorKind::kRaised`). Empty when no caller needs one.
  std::error_code code = {};
};

// Builds an Error with a fmt-formatted message: `return make_error("bad {}", x);`
template <typename... Args>
Error make_error(fmt::format_string<Args...> format, Args&&... args) {
  return Error{fmt::format(format, std::forward<Args>(args)...)};
}

// A value or an Error. A small stand-in for C++23 std::expected, which g++ 12 only has in C++23
// mode and clang 14 (used for the fuzzer) cannot compile from libstdc++.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::in_place_index<0>, std::move(value)) {}
  Expected(Error error) : state_(std::in_place_index<1>, std::move(error)) {}

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(state_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(state_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<1>(state_);
  }

 private:
  std::variant<T, Error> state_;
};

// Success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), failed_(true) {}

  static Status Ok() { return Status(); }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  Error error() const { return error_; }
  const std::string& message() const { return error_.message; }

 private:
  Error error_;
  bool failed_ = false;
};

}  // namespace drift

// Propagates an error from an Expected<T> or Status expression; usable in functions returning
// either Status or Expected<U>.
#define DRIFT_RETURN_IF_ERROR(expr)                        \
  do {                                                     \
    auto drift_status_ = (expr);                           \
    if (!drift_status_.ok()) return drift_status_.error(); \
  } while (0)

#define DRIFT_CONCAT_INNER_(a, b) a##b
#define DRIFT_CONCAT_(a, b) DRIFT_CONCAT_INNER_(a, b)
// `DRIFT_ASSIGN_OR_RETURN(auto x, f());` — binds the value of an Expected or returns its error.
#define DRIFT_ASSIGN_OR_RETURN(lhs, expr)                    \
  auto DRIFT_CONCAT_(drift_expected_, __LINE__) = (expr);    \
  if (!DRIFT_CONCAT_(drift_expected_, __LINE__).ok())        \
    return DRIFT_CONCAT_(drift_expected_, __LINE__).error(); \
  lhs = std::move(DRIFT_CONCAT_(drift_expected_, __LINE__)).value()
