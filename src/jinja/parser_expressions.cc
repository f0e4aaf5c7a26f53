// Parser: jinja2's expression grammar, loosest binding first (conditional, or, and, not,
// comparisons, arithmetic, unary, primary), with postfix subscripts, calls, filters and tests.
#include <fmt/format.h>

#include <memory>

#include "jinja/builtins.h"
#include "jinja/parser_internal.h"

namespace drift::jinja {

bool Parser::is_tuple_end(const TupleOptions& options) {
  const Token& t = current();
  if (t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd ||
      t.type == TokenType::kEof || is_operator(t, ")")) {
    return true;
  }
  return !options.end_name.empty() && is_name(t, options.end_name);
}

Expected<ExprPtr> Parser::parse_tuple(const TupleOptions& options) {
  const SourceLocation location = current().location;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) DRIFT_RETURN_IF_ERROR(expect_operator(","));
    if (is_tuple_end(options)) break;
    DRIFT_ASSIGN_OR_RETURN(ExprPtr item, parse_expression(options.with_condexpr));
    items.push_back(std::move(item));
    if (!is_operator(current(), ",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items.front());
    if (!options.explicit_parentheses) {
      return fail(current(), fmt::format("Expected an expression, got '{}'", describe(current())));
    }
  }
  auto tuple = std::make_unique<SequenceExpr>(ExprKind::kTuple, location);
  tuple->items = std::move(items);
  return seal(std::move(tuple));
}

Expected<ExprPtr> Parser::parse_expression(bool with_condexpr) {
  NestingGuard guard(*this);
  DRIFT_RETURN_IF_ERROR(check_nesting());
  return with_condexpr ? parse_condexpr() : parse_or();
}

Expected<ExprPtr> Parser::parse_condexpr() {
  const SourceLocation location = current().location;
  const bool outer_soft = soft_;
  DRIFT_ASSIGN_OR_RETURN(ExprPtr expr, parse_or());
  while (is_name(current(), "if")) {
    advance();
    soft_ = true;
    auto cond = std::make_unique<ConditionalExpr>(location);
    cond->then_value = std::move(expr);
    DRIFT_ASSIGN_OR_RETURN(cond->condition, parse_or());
    if (skip_name("else")) {
      DRIFT_ASSIGN_OR_RETURN(cond->else_value, parse_condexpr());
    }
    DRIFT_ASSIGN_OR_RETURN(expr, seal(std::move(cond)));
  }
  soft_ = outer_soft;
  return expr;
}

Expected<ExprPtr> Parser::parse_or() {
  DRIFT_ASSIGN_OR_RETURN(ExprPtr left, parse_and());
  while (is_name(current(), "or")) {
    const SourceLocation location = advance().location;
    DRIFT_ASSIGN_OR_RETURN(ExprPtr right, parse_and());
    DRIFT_ASSIGN_OR_RETURN(left, seal(std::make_unique<LogicalExpr>(
                                     ExprKind::kOr, location, std::move(left), std::move(right))));
  }
  return left;
}

Expected<ExprPtr> Parser::parse_and() {
  DRIFT_ASSIGN_OR_RETURN(ExprPtr left, parse_not());
  while (is_name(current(), "and")) {
    const SourceLocation location = advance().location;
    DRIFT_ASSIGN_OR_RETURN(ExprPtr right, parse_not());
    DRIFT_ASSIGN_OR_RETURN(left, seal(std::make_unique<LogicalExpr>(
                                     ExprKind::kAnd, location, std::move(left), std::move(right))));
  }
  return left;
}

Expected<ExprPtr> Parser::parse_not() {
  if (is_name(current(), "not")) {
    const SourceLocation location = advance().location;
    NestingGuard guard(*this);
    DRIFT_RETURN_IF_ERROR(check_nesting());
    DRIFT_ASSIGN_OR_RETURN(ExprPtr operand, parse_not());
    return seal(std::make_unique<UnaryExpr>(ExprKind::kNot, location, std::move(operand)));
  }
  return parse_compare();
}

Expected<ExprPtr> Parser::parse_compare() {
  const SourceLocation location = current().location;
  DRIFT_ASSIGN_OR_RETURN(ExprPtr first, parse_math1());
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
  while (true) {
    const Token& t = current();
    CompareOp op;
    if (is_operator(t, "==")) {
      op = CompareOp::kEqual;
    } else if (is_operator(t, "!=")) {
      op = CompareOp::kNotEqual;
    } else if (is_operator(t, "<")) {
      op = CompareOp::kLess;
    } else if (is_operator(t, "<=")) {
      op = CompareOp::kLessEqual;
    } else if (is_operator(t, ">")) {
      op = CompareOp::kGreater;
    } else if (is_operator(t, ">=")) {
      op = CompareOp::kGreaterEqual;
    } else if (is_name(t, "in")) {
      op = CompareOp::kIn;
    } else if (is_name(t, "not") && is_name(peek(), "in")) {
      op = CompareOp::kNotIn;
      advance();
    } else {
      break;
    }
    advance();
    DRIFT_ASSIGN_OR_RETURN(ExprPtr operand, parse_math1());
    rest.emplace_back(op, std::move(operand));
  }
  if (rest.empty()) return first;
  auto compare = std::make_unique<CompareExpr>(location);
  compare->first = std::move(first);
  compare->rest = std::move(rest);
  return seal(std::move(compare));
}

Expected<ExprPtr> Parser::parse_binary_chain(
    Expected<ExprPtr> (Parser::*operand)(),
    std::initializer_list<std::pair<std::string_view, BinaryOp>> ops) {
  DRIFT_ASSIGN_OR_RETURN(ExprPtr left, (this->*operand)());
  while (true) {
    const BinaryOp* matched = nullptr;
    for (const auto& [spelling, op] : ops) {
      if (is_operator(current(), spelling)) matched = &op;
    }
    if (!matched) return left;
    const BinaryOp op = *matched;
    const SourceLocation location = advance().location;
    DRIFT_ASSIGN_OR_RETURN(ExprPtr right, (this->*operand)());
    DRIFT_ASSIGN_OR_RETURN(
        left, seal(std::make_unique<BinaryExpr>(location, op, std::move(left), std::move(right))));
  }
}

Expected<ExprPtr> Parser::parse_math1() {
  return parse_binary_chain(&Parser::parse_concat,
                            {{"+", BinaryOp::kAdd}, {"-", BinaryOp::kSubtract}});
}

Expected<ExprPtr> Parser::parse_concat() {
  const SourceLocation location = current().location;
  DRIFT_ASSIGN_OR_RETURN(ExprPtr first, parse_math2());
  if (!is_operator(current(), "~")) return first;
  auto concat = std::make_unique<ConcatExpr>(location);
  concat->parts.push_back(std::move(first));
  while (skip_operator("~")) {
    DRIFT_ASSIGN_OR_RETURN(ExprPtr part, parse_math2());
    concat->parts.push_back(std::move(part));
  }
  return seal(std::move(concat));
}

Expected<ExprPtr> Parser::parse_math2() {
  return parse_binary_chain(&Parser::parse_pow, {{"*", BinaryOp::kMultiply},
                                                 {"/", BinaryOp::kDivide},
                                                 {"//", BinaryOp::kFloorDivide},
                                                 {"%", BinaryOp::kModulo}});
}

Expected<ExprPtr> Parser::parse_pow() {
  return parse_binary_chain(&Parser::parse_unary_with_filters, {{"**", BinaryOp::kPower}});
}

Expected<ExprPtr> Parser::parse_unary(bool with_filter) {
  const Token& t = current();
  ExprPtr node;
  if (is_operator(t, "-") || is_operator(t, "+")) {
    NestingGuard guard(*this);
    DRIFT_RETURN_IF_ERROR(check_nesting());
    const ExprKind kind = t.text == "-" ? ExprKind::kNegate : ExprKind::kPlus;
    const SourceLocation location = advance().location;
    DRIFT_ASSIGN_OR_RETURN(ExprPtr operand, parse_unary(false));
    DRIFT_ASSIGN_OR_RETURN(node,
                           seal(std::make_unique<UnaryExpr>(kind, location, std::move(operand))));
  } else {
    DRIFT_ASSIGN_OR_RETURN(node, parse_primary());
  }
  DRIFT_ASSIGN_OR_RETURN(node, parse_postfix(std::move(node)));
  if (with_filter) {
    DRIFT_ASSIGN_OR_RETURN(node, parse_filter_expr(std::move(node)));
  }
  return node;
}

Expected<ExprPtr> Parser::parse_primary() {
  const Token& t = current();
  switch (t.type) {
    case TokenType::kName: {
      advance();
      if (t.text == "true" || t.text == "True") return literal(t, Value::boolean(true));
      if (t.text == "false" || t.text == "False") return literal(t, Value::boolean(false));
      if (t.text == "none" || t.text == "None") return literal(t, Value::none());
      if (!macros_.empty()) {
        if (t.text == "varargs") macros_.back()->reads_varargs = true;
        if (t.text == "kwargs") macros_.back()->reads_kwargs = true;
      }
      return ExprPtr(std::make_unique<NameExpr>(t.location, t.text));
    }
    case TokenType::kString: {
      // Adjacent string literals concatenate, as in Python.
      std::string text = advance().text;
      while (current().type == TokenType::kString) text += advance().text;
      return literal(t, Value::string(std::move(text)));
    }
    case TokenType::kInteger:
      advance();
      return literal(t, Value::integer(t.int_value));
    case TokenType::kFloat:
      advance();
      return literal(t, Value::number(t.float_value));
    default:
      break;
  }
  if (is_operator(t, "(")) {
    advance();
    TupleOptions parenthesized;
    parenthesized.explicit_parentheses = true;
    DRIFT_ASSIGN_OR_RETURN(ExprPtr inner, parse_tuple(parenthesized));
    DRIFT_RETURN_IF_ERROR(expect_operator(")"));
    return inner;
  }
  if (is_operator(t, "[")) return parse_list();
  if (is_operator(t, "{")) return parse_dict();
  return fail(t, fmt::format("unexpected '{}'", describe(t)));
}

Expected<ExprPtr> Parser::literal(const Token& t, Value v) {
  return ExprPtr(std::make_unique<LiteralExpr>(t.location, std::move(v)));
}

Expected<ExprPtr> Parser::parse_list() {
  auto list = std::make_unique<SequenceExpr>(ExprKind::kList, advance().location);
  while (!is_operator(current(), "]")) {
    if (!list->items.empty()) DRIFT_RETURN_IF_ERROR(expect_operator(","));
    if (is_operator(current(), "]")) break;
    DRIFT_ASSIGN_OR_RETURN(ExprPtr item, parse_expression(true));
    list->items.push_back(std::move(item));
  }
  advance();
  return seal(std::move(list));
}

Expected<ExprPtr> Parser::parse_dict() {
  auto dict = std::make_unique<DictExpr>(advance().location);
  while (!is_operator(current(), "}")) {
    if (!dict->items.empty()) DRIFT_RETURN_IF_ERROR(expect_operator(","));
    if (is_operator(current(), "}")) break;
    DRIFT_ASSIGN_OR_RETURN(ExprPtr key, parse_expression(true));
    DRIFT_RETURN_IF_ERROR(expect_operator(":"));
    DRIFT_ASSIGN_OR_RETURN(ExprPtr value, parse_expression(true));
    dict->items.emplace_back(std::move(key), std::move(value));
  }
  advance();
  return seal(std::move(dict));
}

Expected<ExprPtr> Parser::parse_postfix(ExprPtr node) {
  while (true) {
    const Token& t = current();
    if (is_operator(t, ".") || is_operator(t, "[")) {
      DRIFT_ASSIGN_OR_RETURN(node, parse_subscript(std::move(node)));
    } else if (is_operator(t, "(")) {
      DRIFT_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
    } else {
      return node;
    }
  }
}

Expected<ExprPtr> Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    const Token& t = current();
    if (is_operator(t, "|")) {
      DRIFT_ASSIGN_OR_RETURN(node, parse_filter_chain(std::move(node), false));
    } else if (is_name(t, "is")) {
      DRIFT_ASSIGN_OR_RETURN(node, parse_test(std::move(node)));
    } else if (is_operator(t, "(")) {
      DRIFT_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
    } else {
      return node;
    }
  }
}

Expected<ExprPtr> Parser::parse_subscript(ExprPtr node) {
  const Token& t = advance();
  if (t.text == ".") {
    const Token& attribute = current();
    if (attribute.type == TokenType::kName) {
      advance();
      return seal(std::make_unique<AttributeExpr>(t.location, std::move(node), attribute.text));
    }
    if (attribute.type == TokenType::kInteger) {  // x.0 is x[0]
      advance();
      return seal(std::make_unique<ItemExpr>(
          t.location, std::move(node),
          std::make_unique<LiteralExpr>(attribute.location, Value::integer(attribute.int_value))));
    }
    return fail(attribute, "expected name or number");
  }
  // '[': an index, a slice, or (Python-style) a tuple of indexes.
  std::vector<ExprPtr> keys;
  while (!is_operator(current(), "]")) {
    if (!keys.empty()) DRIFT_RETURN_IF_ERROR(expect_operator(","));
    DRIFT_ASSIGN_OR_RETURN(ExprPtr key, parse_subscribed(node, t.location));
    if (key->kind == ExprKind::kSlice) {
      if (!keys.empty()) return fail(t, "multi-dimensional subscripts are not supported");
      // The slice took the object; it is the whole subscript.
      DRIFT_RETURN_IF_ERROR(expect_operator("]"));
      return key;
    }
    keys.push_back(std::move(key));
  }
  advance();
  if (keys.empty()) return fail(t, "expected subscript expression");
  ExprPtr key;
  if (keys.size() == 1) {
    key = std::move(keys.front());
  } else {
    auto tuple = std::make_unique<SequenceExpr>(ExprKind::kTuple, t.location);
    tuple->items = std::move(keys);
    DRIFT_ASSIGN_OR_RETURN(key, seal(std::move(tuple)));
  }
  return seal(std::make_unique<ItemExpr>(t.location, std::move(node), std::move(key)));
}

// One subscript: an expression, or a slice start:stop:step (which then owns `object`).
Expected<ExprPtr> Parser::parse_subscribed(ExprPtr& object, SourceLocation location) {
  ExprPtr start;
  if (!is_operator(current(), ":")) {
    DRIFT_ASSIGN_OR_RETURN(start, parse_expression(true));
    if (!is_operator(current(), ":")) return start;
  }
  advance();  // ':'
  auto slice = std::make_unique<SliceExpr>(location);
  slice->start = std::move(start);
  auto ends_part = [&] {
    return is_operator(current(), "]") || is_operator(current(), ",") ||
           is_operator(current(), ":");
  };
  if (!ends_part()) {
    DRIFT_ASSIGN_OR_RETURN(slice->stop, parse_expression(true));
  }
  if (skip_operator(":")) {
    if (!is_operator(current(), "]") && !is_operator(current(), ",")) {
      DRIFT_ASSIGN_OR_RETURN(slice->step, parse_expression(true));
    }
  }
  if (!is_operator(current(), "]")) {
    return fail(current(), "multi-dimensional slices are not supported");
  }
  slice->object = std::move(object);
  return seal(std::move(slice));
}

Expected<CallArguments> Parser::parse_call_arguments() {
  const Token& open = current();
  DRIFT_RETURN_IF_ERROR(expect_operator("("));
  CallArguments args;
  bool first = true;
  while (!is_operator(current(), ")")) {
    if (!first) {
      DRIFT_RETURN_IF_ERROR(expect_operator(","));
      if (is_operator(current(), ")")) break;
    }
    first = false;
    if (is_operator(current(), "*") || is_operator(current(), "**")) {
      return fail(current(), "*args and **kwargs in calls are not supported");
    }
    if (current().type == TokenType::kName && is_operator(peek(), "=")) {
      std::string key = advance().text;
      advance();
      DRIFT_ASSIGN_OR_RETURN(ExprPtr value, parse_expression(true));
      args.keywords.emplace_back(std::move(key), std::move(value));
    } else {
      if (!args.keywords.empty()) {
        return fail(open, "invalid syntax for function call expression");
      }
      DRIFT_ASSIGN_OR_RETURN(ExprPtr value, parse_expression(true));
      args.positional.push_back(std::move(value));
    }
  }
  advance();
  return args;
}

Expected<ExprPtr> Parser::parse_call(ExprPtr callee) {
  // Reported at the callee, e.g. at `raise_exception` rather than at its '('.
  auto call = std::make_unique<CallExpr>(callee->location);
  call->callee = std::move(callee);
  DRIFT_ASSIGN_OR_RETURN(call->arguments, parse_call_arguments());
  return seal(std::move(call));
}

Expected<std::string> Parser::parse_dotted_name() {
  DRIFT_ASSIGN_OR_RETURN(std::string name, expect_identifier());
  while (skip_operator(".")) {
    DRIFT_ASSIGN_OR_RETURN(std::string part, expect_identifier());
    name += "." + part;
  }
  return name;
}

// `| name(args) | name ...` applied to `input` (null: the body of a filter section). With
// `start_inline` the first filter has no leading '|'.
Expected<ExprPtr> Parser::parse_filter_chain(ExprPtr input, bool start_inline) {
  while (is_operator(current(), "|") || start_inline) {
    if (!start_inline) advance();
    start_inline = false;
    const Token& name_token = current();
    auto filter = std::make_unique<FilterExpr>(name_token.location);
    DRIFT_ASSIGN_OR_RETURN(filter->name, parse_dotted_name());
    if (!soft_ && !find_filter(filter->name)) {
      return fail(name_token, fmt::format("No filter named '{}'.", filter->name));
    }
    if (is_operator(current(), "(")) {
      DRIFT_ASSIGN_OR_RETURN(filter->arguments, parse_call_arguments());
    }
    filter->input = std::move(input);
    DRIFT_ASSIGN_OR_RETURN(input, seal(std::move(filter)));
  }
  return input;
}

Expected<ExprPtr> Parser::parse_test(ExprPtr input) {
  const SourceLocation location = advance().location;  // 'is'
  const bool negated = skip_name("not");
  const Token& name_token = current();
  auto test = std::make_unique<TestExpr>(location);
  DRIFT_ASSIGN_OR_RETURN(test->name, parse_dotted_name());
  if (!soft_ && !find_test(test->name)) {
    return fail(name_token, fmt::format("No test named '{}'.", test->name));
  }
  const Token& t = current();
  if (is_operator(t, "(")) {
    DRIFT_ASSIGN_OR_RETURN(test->arguments, parse_call_arguments());
  } else if ((t.type == TokenType::kName || t.type == TokenType::kString ||
              t.type == TokenType::kInteger || t.type == TokenType::kFloat || is_operator(t, "[") ||
              is_operator(t, "{")) &&
             !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
    // One argument without parentheses: `x is divisibleby 3`, `x is equalto y`.
    if (is_name(t, "is")) return fail(t, "You cannot chain multiple tests with is");
    DRIFT_ASSIGN_OR_RETURN(ExprPtr argument, parse_primary());
    DRIFT_ASSIGN_OR_RETURN(argument, parse_postfix(std::move(argument)));
    test->arguments.positional.push_back(std::move(argument));
  }
  test->input = std::move(input);
  DRIFT_ASSIGN_OR_RETURN(ExprPtr node, seal(std::move(test)));
  if (negated) {
    return seal(std::make_unique<UnaryExpr>(ExprKind::kNot, location, std::move(node)));
  }
  return node;
}

}  // namespace drift::jinja
