// Parser: the statements (tags) of jinja2: if, for, set, macro, filter, with, generation,
// break/continue, and the output of {{ }}.
#include <fmt/format.h>

#include <memory>

#include "jinja/parser_internal.h"

namespace drift::jinja {

// Parses statements until a block tag whose name is one of `end_tags` (left as the current
// token, after its `{%`), or the end of the template when `end_tags` is empty.
Expected<StmtList> Parser::subparse(std::initializer_list<std::string_view> end_tags) {
  if (end_tags.size() == 0) return subparse_body(end_tags);
  end_tags_stack_.emplace_back(end_tags.begin(), end_tags.end());
  auto body = subparse_body(end_tags);
  end_tags_stack_.pop_back();
  return body;
}

Expected<StmtList> Parser::subparse_body(std::initializer_list<std::string_view> end_tags) {
  StmtList body;
  while (true) {
    const Token& t = current();
    switch (t.type) {
      case TokenType::kText:
        body.push_back(std::make_unique<TextStmt>(t.location, t.text));
        advance();
        break;
      case TokenType::kVariableBegin: {
        advance();
        auto output = std::make_unique<OutputStmt>(t.location);
        DRIFT_ASSIGN_OR_RETURN(ExprPtr value, parse_tuple(TupleOptions{}));
        output->values.push_back(std::move(value));
        DRIFT_RETURN_IF_ERROR(expect(TokenType::kVariableEnd));
        body.push_back(std::move(output));
        break;
      }
      case TokenType::kBlockBegin: {
        const Token& name = peek();
        for (std::string_view end : end_tags) {
          if (is_name(name, end)) {
            advance();
            return body;
          }
        }
        advance();
        DRIFT_ASSIGN_OR_RETURN(StmtPtr stmt, parse_statement());
        if (stmt) body.push_back(std::move(stmt));
        DRIFT_RETURN_IF_ERROR(expect(TokenType::kBlockEnd));
        break;
      }
      case TokenType::kEof:
        if (end_tags.size() == 0) return body;
        return fail_unclosed(t, "");
      default:
        return fail(t, fmt::format("unexpected '{}'", describe(t)));
    }
  }
}

// The body of a block statement: the opening tag's `%}`, then statements up to one of
// `end_tags`, whose name is left as the current token.
Expected<StmtList> Parser::parse_body(std::initializer_list<std::string_view> end_tags) {
  DRIFT_RETURN_IF_ERROR(expect(TokenType::kBlockEnd));
  return subparse(end_tags);
}

Expected<StmtPtr> Parser::parse_statement() {
  NestingGuard guard(*this);
  DRIFT_RETURN_IF_ERROR(check_nesting());
  const Token& t = current();
  if (t.type != TokenType::kName) return fail(t, "tag name expected");
  const std::string& tag = t.text;
  tag_stack_.push_back(tag);
  auto stmt = parse_tagged_statement(t);
  tag_stack_.pop_back();
  return stmt;
}

Expected<StmtPtr> Parser::parse_tagged_statement(const Token& t) {
  const std::string& tag = t.text;
  if (tag == "if") return parse_if();
  if (tag == "for") return parse_for();
  if (tag == "set") return parse_set();
  if (tag == "macro") return parse_macro();
  if (tag == "filter") return parse_filter_block();
  if (tag == "with") return parse_with();
  if (tag == "generation") return parse_generation();
  if (tag == "print") return parse_print();
  if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) return fail(t, fmt::format("'{}' outside of a loop", tag));
    advance();
    return StmtPtr(std::make_unique<LoopControlStmt>(
        tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, t.location));
  }
  static constexpr std::string_view kUnsupported[] = {"block", "extends", "include",   "import",
                                                      "from",  "call",    "autoescape"};
  if (std::find(std::begin(kUnsupported), std::end(kUnsupported), tag) != std::end(kUnsupported)) {
    return fail(t, fmt::format("the '{}' tag is not supported", tag));
  }
  tag_stack_.pop_back();  // jinja2 names the enclosing block, not the unknown tag itself
  Error error = fail_unclosed(t, tag);
  tag_stack_.push_back(tag);
  return error;
}

Expected<StmtPtr> Parser::parse_if() {
  auto stmt = std::make_unique<IfStmt>(advance().location);
  const bool outer_soft = soft_;
  soft_ = true;  // unknown filters in an if are only errors once reached (as in jinja2)
  while (true) {
    IfStmt::Branch branch;
    TupleOptions condition_options;
    condition_options.with_condexpr = false;
    DRIFT_ASSIGN_OR_RETURN(branch.condition, parse_tuple(condition_options));
    DRIFT_ASSIGN_OR_RETURN(branch.body, parse_body({"elif", "else", "endif"}));
    stmt->branches.push_back(std::move(branch));
    const std::string& end = advance().text;
    if (end == "elif") continue;
    if (end == "else") {
      DRIFT_ASSIGN_OR_RETURN(stmt->else_body, parse_body({"endif"}));
      advance();
    }
    break;
  }
  soft_ = outer_soft;
  return StmtPtr(std::move(stmt));
}

Expected<StmtPtr> Parser::parse_for() {
  auto stmt = std::make_unique<ForStmt>(advance().location);
  DRIFT_ASSIGN_OR_RETURN(stmt->target, parse_assign_target("in", false));
  if (!skip_name("in")) return fail_expected("in");
  TupleOptions iterable_options;
  iterable_options.with_condexpr = false;
  iterable_options.end_name = "recursive";
  DRIFT_ASSIGN_OR_RETURN(stmt->iterable, parse_tuple(iterable_options));
  if (skip_name("if")) {
    DRIFT_ASSIGN_OR_RETURN(stmt->filter, parse_expression(true));
  }
  if (is_name(current(), "recursive")) {
    return fail(current(), "recursive loops are not supported");
  }
  const bool outer_soft = soft_;
  soft_ = false;
  ++loop_depth_;
  DRIFT_ASSIGN_OR_RETURN(stmt->body, parse_body({"endfor", "else"}));
  --loop_depth_;
  if (advance().text == "else") {
    DRIFT_ASSIGN_OR_RETURN(stmt->else_body, parse_body({"endfor"}));
    advance();
  }
  soft_ = outer_soft;
  return StmtPtr(std::move(stmt));
}

Expected<StmtPtr> Parser::parse_set() {
  const SourceLocation location = advance().location;
  DRIFT_ASSIGN_OR_RETURN(AssignTarget target, parse_assign_target("", true));
  if (skip_operator("=")) {
    auto stmt = std::make_unique<SetStmt>(location);
    stmt->target = std::move(target);
    DRIFT_ASSIGN_OR_RETURN(stmt->value, parse_tuple(TupleOptions{}));
    return StmtPtr(std::move(stmt));
  }
  auto stmt = std::make_unique<SetBlockStmt>(location);
  stmt->target = std::move(target);
  if (is_operator(current(), "|")) {
    DRIFT_ASSIGN_OR_RETURN(stmt->filter, parse_filter_chain(nullptr, false));
  }
  DRIFT_ASSIGN_OR_RETURN(stmt->body, parse_scoped_body({"endset"}));
  advance();
  return StmtPtr(std::move(stmt));
}

// A body rendered in its own frame (block set, macro, filter block, with): `if`-softness and
// loop controls of the enclosing statements do not reach into it.
Expected<StmtList> Parser::parse_scoped_body(std::initializer_list<std::string_view> end_tags) {
  const bool outer_soft = soft_;
  const int outer_loops = loop_depth_;
  soft_ = false;
  loop_depth_ = 0;
  auto body = parse_body(end_tags);
  soft_ = outer_soft;
  loop_depth_ = outer_loops;
  return body;
}

Expected<StmtPtr> Parser::parse_macro() {
  auto stmt = std::make_unique<MacroStmt>(advance().location);
  DRIFT_ASSIGN_OR_RETURN(stmt->name, expect_identifier());
  DRIFT_RETURN_IF_ERROR(expect_operator("("));
  while (!is_operator(current(), ")")) {
    if (!stmt->parameters.empty()) DRIFT_RETURN_IF_ERROR(expect_operator(","));
    if (is_operator(current(), ")")) break;
    DRIFT_ASSIGN_OR_RETURN(std::string parameter, expect_identifier());
    if (skip_operator("=")) {
      DRIFT_ASSIGN_OR_RETURN(ExprPtr default_value, parse_expression(true));
      stmt->defaults.push_back(std::move(default_value));
    } else if (!stmt->defaults.empty()) {
      return fail(current(), "non-default argument follows default argument");
    }
    stmt->parameters.push_back(std::move(parameter));
  }
  advance();
  macros_.push_back(stmt.get());
  auto body = parse_scoped_body({"endmacro"});
  macros_.pop_back();
  DRIFT_ASSIGN_OR_RETURN(stmt->body, std::move(body));
  advance();
  return StmtPtr(std::move(stmt));
}

Expected<StmtPtr> Parser::parse_filter_block() {
  auto stmt = std::make_unique<FilterBlockStmt>(advance().location);
  DRIFT_ASSIGN_OR_RETURN(stmt->filter, parse_filter_chain(nullptr, true));
  DRIFT_ASSIGN_OR_RETURN(stmt->body, parse_scoped_body({"endfilter"}));
  advance();
  return StmtPtr(std::move(stmt));
}

Expected<StmtPtr> Parser::parse_with() {
  auto stmt = std::make_unique<WithStmt>(advance().location);
  while (current().type != TokenType::kBlockEnd) {
    if (!stmt->assignments.empty()) DRIFT_RETURN_IF_ERROR(expect_operator(","));
    AssignTarget target;
    target.location = current().location;
    DRIFT_ASSIGN_OR_RETURN(std::string name, expect_identifier());
    target.names.push_back(std::move(name));
    DRIFT_RETURN_IF_ERROR(expect_operator("="));
    DRIFT_ASSIGN_OR_RETURN(ExprPtr value, parse_expression(true));
    stmt->assignments.emplace_back(std::move(target), std::move(value));
  }
  DRIFT_ASSIGN_OR_RETURN(stmt->body, parse_scoped_body({"endwith"}));
  advance();
  return StmtPtr(std::move(stmt));
}

// Hugging Face's {% generation %} marks assistant text for training masks; rendering it is
// rendering its body (in a frame of its own, as jinja2 runs it through a call block).
Expected<StmtPtr> Parser::parse_generation() {
  auto stmt = std::make_unique<ScopedBlockStmt>(advance().location);
  DRIFT_ASSIGN_OR_RETURN(stmt->body, parse_scoped_body({"endgeneration"}));
  advance();
  return StmtPtr(std::move(stmt));
}

Expected<StmtPtr> Parser::parse_print() {
  auto stmt = std::make_unique<OutputStmt>(advance().location);
  while (current().type != TokenType::kBlockEnd) {
    if (!stmt->values.empty()) DRIFT_RETURN_IF_ERROR(expect_operator(","));
    DRIFT_ASSIGN_OR_RETURN(ExprPtr value, parse_expression(true));
    stmt->values.push_back(std::move(value));
  }
  return StmtPtr(std::move(stmt));
}

// Names, optionally separated by commas (for unpacking) and wrapped in parentheses, or with
// `allow_namespace` a namespace attribute `ns.name`. `end_name` ends a trailing-comma list.
Expected<AssignTarget> Parser::parse_assign_target(std::string_view end_name,
                                                   bool allow_namespace) {
  AssignTarget target;
  target.location = current().location;
  const bool parenthesized = skip_operator("(");
  while (true) {
    DRIFT_ASSIGN_OR_RETURN(std::string name, expect_identifier());
    if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" ||
        name == "None") {
      return fail(current(), fmt::format("can't assign to '{}'", name));
    }
    if (allow_namespace && !parenthesized && target.names.empty() && is_operator(current(), ".")) {
      advance();
      DRIFT_ASSIGN_OR_RETURN(target.attribute, expect_identifier());
      target.kind = AssignTarget::Kind::kNamespaceAttribute;
      target.names.push_back(std::move(name));
      return target;
    }
    target.names.push_back(std::move(name));
    if (!skip_operator(",")) break;
    target.kind = AssignTarget::Kind::kNames;
    if (is_operator(current(), ")") || is_operator(current(), "=") ||
        (!end_name.empty() && is_name(current(), end_name))) {
      break;
    }
  }
  if (parenthesized) {
    DRIFT_RETURN_IF_ERROR(expect_operator(")"));
    if (target.names.size() > 1) target.kind = AssignTarget::Kind::kNames;
  }
  return target;
}

}  // namespace drift::jinja
