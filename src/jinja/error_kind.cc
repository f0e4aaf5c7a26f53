#include "jinja/error_kind.h"

namespace drift::jinja {
namespace {

class Category : public std::error_category {
 public:
  const char* name() const noexcept override { return "jinja"; }
  std::string message(int kind) const override {
    switch (static_cast<ErrorKind>(kind)) {
      case ErrorKind::kSyntax:
        return "template syntax error";
      case ErrorKind::kRuntime:
        return "template error while rendering";
      case ErrorKind::kRaised:
        return "the template raised an exception";
      case ErrorKind::kLimit:
        return "a template sandbox limit was reached";
      case ErrorKind::kInvalidVariables:
        return "invalid template variables";
    }
    return "unknown template error";
  }
};

}  // namespace

const std::error_category& error_category() {
  static const Category category;
  return category;
}

std::error_code make_error_code(ErrorKind kind) {
  return {static_cast<int>(kind), error_category()};
}

Error with_default_kind(Error error, ErrorKind kind) {
  if (!error.code) error.code = make_error_code(kind);
  return error;
}

}  // namespace drift::jinja
