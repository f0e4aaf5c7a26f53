#include "jinja/parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <initializer_list>
#include <optional>

#include "jinja/parser_internal.h"

namespace drift::jinja {
namespace {

uint32_t height_of(const ExprPtr& e) { return e ? e->height : 0; }

uint32_t args_height(const CallArguments& args) {
  uint32_t h = 0;
  for (const auto& a : args.positional) h = std::max(h, height_of(a));
  for (const auto& [name, a] : args.keywords) h = std::max(h, height_of(a));
  return h;
}

// Height of a node from its direct children.
uint32_t compute_height(const Expr& e) {
  uint32_t h = 0;
  switch (e.kind) {
    case ExprKind::kLiteral:
    case ExprKind::kName:
      break;
    case ExprKind::kList:
    case ExprKind::kTuple:
      for (const auto& item : static_cast<const SequenceExpr&>(e).items) {
        h = std::max(h, height_of(item));
      }
      break;
    case ExprKind::kDict:
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) {
        h = std::max({h, height_of(k), height_of(v)});
      }
      break;
    case ExprKind::kAttribute:
      h = height_of(static_cast<const AttributeExpr&>(e).object);
      break;
    case ExprKind::kItem: {
      const auto& item = static_cast<const ItemExpr&>(e);
      h = std::max(height_of(item.object), height_of(item.key));
      break;
    }
    case ExprKind::kSlice: {
      const auto& s = static_cast<const SliceExpr&>(e);
      h = std::max({height_of(s.object), height_of(s.start), height_of(s.stop), height_of(s.step)});
      break;
    }
    case ExprKind::kCall: {
      const auto& c = static_cast<const CallExpr&>(e);
      h = std::max(height_of(c.callee), args_height(c.arguments));
      break;
    }
    case ExprKind::kFilter: {
      const auto& f = static_cast<const FilterExpr&>(e);
      h = std::max(height_of(f.input), args_height(f.arguments));
      break;
    }
    case ExprKind::kTest: {
      const auto& t = static_cast<const TestExpr&>(e);
      h = std::max(height_of(t.input), args_height(t.arguments));
      break;
    }
    case ExprKind::kNegate:
    case ExprKind::kPlus:
    case ExprKind::kNot:
      h = height_of(static_cast<const UnaryExpr&>(e).operand);
      break;
    case ExprKind::kBinary: {
      const auto& b = static_cast<const BinaryExpr&>(e);
      h = std::max(height_of(b.left), height_of(b.right));
      break;
    }
    case ExprKind::kCompare: {
      const auto& c = static_cast<const CompareExpr&>(e);
      h = height_of(c.first);
      for (const auto& [op, operand] : c.rest) h = std::max(h, height_of(operand));
      break;
    }
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      const auto& l = static_cast<const LogicalExpr&>(e);
      h = std::max(height_of(l.left), height_of(l.right));
      break;
    }
    case ExprKind::kConcat:
      for (const auto& part : static_cast<const ConcatExpr&>(e).parts) {
        h = std::max(h, height_of(part));
      }
      break;
    case ExprKind::kConditional: {
      const auto& c = static_cast<const ConditionalExpr&>(e);
      h = std::max({height_of(c.condition), height_of(c.then_value), height_of(c.else_value)});
      break;
    }
  }
  return h + 1;
}

}  // namespace

Expected<StmtList> Parser::parse() {
  auto body = subparse({});
  // A lexer error ends the token stream early; it, not what the parser made of the early
  // end, is the error to report.
  if (lex_error_) return *lex_error_;
  return body;
}

Status Parser::check_nesting() {
  if (nesting_ > limits_.max_nesting) {
    return fail(current(),
                fmt::format("the template nests more than {} levels deep", limits_.max_nesting));
  }
  return Status::Ok();
}

// Token `i` of the template, lexed on demand. Tokens live in a deque, so references to them
// stay valid while more are lexed.
const Token& Parser::token(size_t i) {
  while (tokens_.size() <= i) {
    if (!tokens_.empty() && tokens_.back().type == TokenType::kEof) return tokens_.back();
    auto next = lexer_.next();
    if (next.ok()) {
      tokens_.push_back(std::move(next).value());
    } else {
      lex_error_ = next.error();
      Token end;
      end.type = TokenType::kEof;
      end.location = tokens_.empty() ? SourceLocation{} : tokens_.back().location;
      tokens_.push_back(std::move(end));
    }
  }
  return tokens_[i];
}

const Token& Parser::advance() {
  const Token& t = current();
  if (t.type != TokenType::kEof) ++pos_;
  return t;
}

bool Parser::is_operator(const Token& t, std::string_view op) {
  return t.type == TokenType::kOperator && t.text == op;
}

bool Parser::is_name(const Token& t, std::string_view name) {
  return t.type == TokenType::kName && t.text == name;
}

bool Parser::skip_operator(std::string_view op) {
  if (!is_operator(current(), op)) return false;
  advance();
  return true;
}

bool Parser::skip_name(std::string_view name) {
  if (!is_name(current(), name)) return false;
  advance();
  return true;
}

// How jinja2 names a token in messages: names and operators as written, others by kind.
std::string Parser::describe(const Token& t) {
  switch (t.type) {
    case TokenType::kText:
      return "template data / text";
    case TokenType::kVariableBegin:
      return "begin of print statement";
    case TokenType::kVariableEnd:
      return "end of print statement";
    case TokenType::kBlockBegin:
      return "begin of statement block";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kEof:
      return "end of template";
    case TokenType::kString:
      return "string";
    case TokenType::kInteger:
      return "integer";
    case TokenType::kFloat:
      return "float";
    default:
      return t.text;
  }
}

Error Parser::fail(const Token& at, std::string_view message) const {
  return Error{fmt::format("syntax error at {}: {}", describe_location(at.location), message)};
}

// jinja2's message for a token other than `expected` (a description like the above).
Error Parser::fail_expected(std::string_view expected) {
  if (current().type == TokenType::kEof) {
    return fail(current(), fmt::format("unexpected end of template, expected '{}'.", expected));
  }
  return fail(current(),
              fmt::format("expected token '{}', got '{}'", expected, describe(current())));
}

Status Parser::expect_operator(std::string_view op) {
  if (skip_operator(op)) return Status::Ok();
  return fail_expected(op);
}

Status Parser::expect(TokenType type) {
  if (current().type == type) {
    advance();
    return Status::Ok();
  }
  Token wanted;
  wanted.type = type;
  return fail_expected(describe(wanted));
}

Expected<std::string> Parser::expect_identifier() {
  if (current().type != TokenType::kName) return fail_expected("name");
  return advance().text;
}

// jinja2's message for an unknown tag (`name`) or the end of the template (empty `name`)
// while blocks are open: which end tags it was looking for and which block is innermost.
Error Parser::fail_unclosed(const Token& at, std::string_view name) const {
  std::string message = name.empty() ? std::string("Unexpected end of template.")
                                     : fmt::format("Encountered unknown tag '{}'.", name);
  if (!end_tags_stack_.empty()) {
    bool expected_somewhere = false;
    for (const auto& tags : end_tags_stack_) {
      for (std::string_view tag : tags) expected_somewhere |= tag == name;
    }
    std::string looking;
    for (std::string_view tag : end_tags_stack_.back()) {
      if (!looking.empty()) looking += " or ";
      looking += fmt::format("'{}'", tag);
    }
    if (!name.empty() && expected_somewhere) {
      message += fmt::format(
          " You probably made a nesting mistake. Jinja is expecting this tag, but currently "
          "looking for {}.",
          looking);
    } else {
      message += fmt::format(" Jinja was looking for the following tags: {}.", looking);
    }
  }
  if (!tag_stack_.empty()) {
    message +=
        fmt::format(" The innermost block that needs to be closed is '{}'.", tag_stack_.back());
  }
  return fail(at, message);
}

Expected<ExprPtr> Parser::seal(ExprPtr node) {
  node->height = compute_height(*node);
  if (node->height > limits_.max_expression_height) {
    return Error{fmt::format("syntax error at {}: expression nests more than {} levels deep",
                             describe_location(node->location), limits_.max_expression_height)};
  }
  return node;
}

Expected<StmtList> parse_template(std::string_view source, const SyntaxOptions& syntax,
                                  const ParseLimits& limits) {
  Parser parser(source, syntax, limits);
  return parser.parse();
}

}  // namespace drift::jinja
