#include "tokenizer/jinja_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <initializer_list>
#include <optional>

#include "tokenizer/jinja_builtins.h"

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

class Parser {
 public:
  Parser(std::string_view source, const SyntaxOptions& syntax, const ParseLimits& limits)
      : lexer_(source, syntax, limits.max_nesting), limits_(limits) {}

  Expected<StmtList> parse() {
    auto body = subparse({});
    // A lexer error ends the token stream early; it, not what the parser made of the early
    // end, is the error to report.
    if (lex_error_) return *lex_error_;
    return body;
  }

 private:
  // Counts one level of recursion for as long as it lives; the parser fails past the limit.
  class NestingGuard {
   public:
    explicit NestingGuard(Parser& p) : p_(p) { ++p_.nesting_; }
    ~NestingGuard() { --p_.nesting_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

   private:
    Parser& p_;
  };

  Status check_nesting() {
    if (nesting_ > limits_.max_nesting) {
      return fail(current(),
                  fmt::format("the template nests more than {} levels deep", limits_.max_nesting));
    }
    return Status::Ok();
  }

  // ---- token stream ----

  // Token `i` of the template, lexed on demand. Tokens live in a deque, so references to them
  // stay valid while more are lexed.
  const Token& token(size_t i) {
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
  const Token& current() { return token(pos_); }
  const Token& peek(size_t ahead = 1) { return token(pos_ + ahead); }
  const Token& advance() {
    const Token& t = current();
    if (t.type != TokenType::kEof) ++pos_;
    return t;
  }

  static bool is_operator(const Token& t, std::string_view op) {
    return t.type == TokenType::kOperator && t.text == op;
  }
  static bool is_name(const Token& t, std::string_view name) {
    return t.type == TokenType::kName && t.text == name;
  }
  bool skip_operator(std::string_view op) {
    if (!is_operator(current(), op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(current(), name)) return false;
    advance();
    return true;
  }

  // How jinja2 names a token in messages: names and operators as written, others by kind.
  static std::string describe(const Token& t) {
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

  Error fail(const Token& at, std::string_view message) const {
    return Error{fmt::format("syntax error at {}: {}", describe_location(at.location), message)};
  }

  // jinja2's message for a token other than `expected` (a description like the above).
  Error fail_expected(std::string_view expected) {
    if (current().type == TokenType::kEof) {
      return fail(current(), fmt::format("unexpected end of template, expected '{}'.", expected));
    }
    return fail(current(),
                fmt::format("expected token '{}', got '{}'", expected, describe(current())));
  }

  Status expect_operator(std::string_view op) {
    if (skip_operator(op)) return Status::Ok();
    return fail_expected(op);
  }

  Status expect(TokenType type) {
    if (current().type == type) {
      advance();
      return Status::Ok();
    }
    Token wanted;
    wanted.type = type;
    return fail_expected(describe(wanted));
  }

  Expected<std::string> expect_identifier() {
    if (current().type != TokenType::kName) return fail_expected("name");
    return advance().text;
  }

  // jinja2's message for an unknown tag (`name`) or the end of the template (empty `name`)
  // while blocks are open: which end tags it was looking for and which block is innermost.
  Error fail_unclosed(const Token& at, std::string_view name) const {
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

  Expected<ExprPtr> seal(ExprPtr node) {
    node->height = compute_height(*node);
    if (node->height > limits_.max_expression_height) {
      return Error{fmt::format("syntax error at {}: expression nests more than {} levels deep",
                               describe_location(node->location), limits_.max_expression_height)};
    }
    return node;
  }

  // ---- statements ----

  // Parses statements until a block tag whose name is one of `end_tags` (left as the current
  // token, after its `{%`), or the end of the template when `end_tags` is empty.
  Expected<StmtList> subparse(std::initializer_list<std::string_view> end_tags) {
    if (end_tags.size() == 0) return subparse_body(end_tags);
    end_tags_stack_.emplace_back(end_tags.begin(), end_tags.end());
    auto body = subparse_body(end_tags);
    end_tags_stack_.pop_back();
    return body;
  }

  Expected<StmtList> subparse_body(std::initializer_list<std::string_view> end_tags) {
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
  Expected<StmtList> parse_body(std::initializer_list<std::string_view> end_tags) {
    DRIFT_RETURN_IF_ERROR(expect(TokenType::kBlockEnd));
    return subparse(end_tags);
  }

  Expected<StmtPtr> parse_statement() {
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

  Expected<StmtPtr> parse_tagged_statement(const Token& t) {
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
    if (std::find(std::begin(kUnsupported), std::end(kUnsupported), tag) !=
        std::end(kUnsupported)) {
      return fail(t, fmt::format("the '{}' tag is not supported", tag));
    }
    tag_stack_.pop_back();  // jinja2 names the enclosing block, not the unknown tag itself
    Error error = fail_unclosed(t, tag);
    tag_stack_.push_back(tag);
    return error;
  }

  Expected<StmtPtr> parse_if() {
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

  Expected<StmtPtr> parse_for() {
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

  Expected<StmtPtr> parse_set() {
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
  Expected<StmtList> parse_scoped_body(std::initializer_list<std::string_view> end_tags) {
    const bool outer_soft = soft_;
    const int outer_loops = loop_depth_;
    soft_ = false;
    loop_depth_ = 0;
    auto body = parse_body(end_tags);
    soft_ = outer_soft;
    loop_depth_ = outer_loops;
    return body;
  }

  Expected<StmtPtr> parse_macro() {
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

  Expected<StmtPtr> parse_filter_block() {
    auto stmt = std::make_unique<FilterBlockStmt>(advance().location);
    DRIFT_ASSIGN_OR_RETURN(stmt->filter, parse_filter_chain(nullptr, true));
    DRIFT_ASSIGN_OR_RETURN(stmt->body, parse_scoped_body({"endfilter"}));
    advance();
    return StmtPtr(std::move(stmt));
  }

  Expected<StmtPtr> parse_with() {
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
  Expected<StmtPtr> parse_generation() {
    auto stmt = std::make_unique<ScopedBlockStmt>(advance().location);
    DRIFT_ASSIGN_OR_RETURN(stmt->body, parse_scoped_body({"endgeneration"}));
    advance();
    return StmtPtr(std::move(stmt));
  }

  Expected<StmtPtr> parse_print() {
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
  Expected<AssignTarget> parse_assign_target(std::string_view end_name, bool allow_namespace) {
    AssignTarget target;
    target.location = current().location;
    const bool parenthesized = skip_operator("(");
    while (true) {
      DRIFT_ASSIGN_OR_RETURN(std::string name, expect_identifier());
      if (name == "true" || name == "false" || name == "none" || name == "True" ||
          name == "False" || name == "None") {
        return fail(current(), fmt::format("can't assign to '{}'", name));
      }
      if (allow_namespace && !parenthesized && target.names.empty() &&
          is_operator(current(), ".")) {
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

  // ---- expressions (jinja2's grammar, loosest binding first) ----

  struct TupleOptions {
    bool with_condexpr = true;
    bool explicit_parentheses = false;
    std::string_view end_name;  // a name that also ends the tuple (e.g. 'recursive')
  };

  bool is_tuple_end(const TupleOptions& options) {
    const Token& t = current();
    if (t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd ||
        t.type == TokenType::kEof || is_operator(t, ")")) {
      return true;
    }
    return !options.end_name.empty() && is_name(t, options.end_name);
  }

  Expected<ExprPtr> parse_tuple(const TupleOptions& options) {
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
        return fail(current(),
                    fmt::format("Expected an expression, got '{}'", describe(current())));
      }
    }
    auto tuple = std::make_unique<SequenceExpr>(ExprKind::kTuple, location);
    tuple->items = std::move(items);
    return seal(std::move(tuple));
  }

  Expected<ExprPtr> parse_expression(bool with_condexpr) {
    NestingGuard guard(*this);
    DRIFT_RETURN_IF_ERROR(check_nesting());
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  Expected<ExprPtr> parse_condexpr() {
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

  Expected<ExprPtr> parse_or() {
    DRIFT_ASSIGN_OR_RETURN(ExprPtr left, parse_and());
    while (is_name(current(), "or")) {
      const SourceLocation location = advance().location;
      DRIFT_ASSIGN_OR_RETURN(ExprPtr right, parse_and());
      DRIFT_ASSIGN_OR_RETURN(
          left, seal(std::make_unique<LogicalExpr>(ExprKind::kOr, location, std::move(left),
                                                   std::move(right))));
    }
    return left;
  }

  Expected<ExprPtr> parse_and() {
    DRIFT_ASSIGN_OR_RETURN(ExprPtr left, parse_not());
    while (is_name(current(), "and")) {
      const SourceLocation location = advance().location;
      DRIFT_ASSIGN_OR_RETURN(ExprPtr right, parse_not());
      DRIFT_ASSIGN_OR_RETURN(
          left, seal(std::make_unique<LogicalExpr>(ExprKind::kAnd, location, std::move(left),
                                                   std::move(right))));
    }
    return left;
  }

  Expected<ExprPtr> parse_not() {
    if (is_name(current(), "not")) {
      const SourceLocation location = advance().location;
      NestingGuard guard(*this);
      DRIFT_RETURN_IF_ERROR(check_nesting());
      DRIFT_ASSIGN_OR_RETURN(ExprPtr operand, parse_not());
      return seal(std::make_unique<UnaryExpr>(ExprKind::kNot, location, std::move(operand)));
    }
    return parse_compare();
  }

  Expected<ExprPtr> parse_compare() {
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

  Expected<ExprPtr> parse_binary_chain(
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
      DRIFT_ASSIGN_OR_RETURN(left, seal(std::make_unique<BinaryExpr>(location, op, std::move(left),
                                                                     std::move(right))));
    }
  }

  Expected<ExprPtr> parse_math1() {
    return parse_binary_chain(&Parser::parse_concat,
                              {{"+", BinaryOp::kAdd}, {"-", BinaryOp::kSubtract}});
  }

  Expected<ExprPtr> parse_concat() {
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

  Expected<ExprPtr> parse_math2() {
    return parse_binary_chain(&Parser::parse_pow, {{"*", BinaryOp::kMultiply},
                                                   {"/", BinaryOp::kDivide},
                                                   {"//", BinaryOp::kFloorDivide},
                                                   {"%", BinaryOp::kModulo}});
  }

  Expected<ExprPtr> parse_pow() {
    return parse_binary_chain(&Parser::parse_unary_with_filters, {{"**", BinaryOp::kPower}});
  }

  Expected<ExprPtr> parse_unary_with_filters() { return parse_unary(true); }

  Expected<ExprPtr> parse_unary(bool with_filter) {
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

  Expected<ExprPtr> parse_primary() {
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

  static Expected<ExprPtr> literal(const Token& t, Value v) {
    return ExprPtr(std::make_unique<LiteralExpr>(t.location, std::move(v)));
  }

  Expected<ExprPtr> parse_list() {
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

  Expected<ExprPtr> parse_dict() {
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

  Expected<ExprPtr> parse_postfix(ExprPtr node) {
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

  Expected<ExprPtr> parse_filter_expr(ExprPtr node) {
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

  Expected<ExprPtr> parse_subscript(ExprPtr node) {
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
            std::make_unique<LiteralExpr>(attribute.location,
                                          Value::integer(attribute.int_value))));
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
  Expected<ExprPtr> parse_subscribed(ExprPtr& object, SourceLocation location) {
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

  Expected<CallArguments> parse_call_arguments() {
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

  Expected<ExprPtr> parse_call(ExprPtr callee) {
    // Reported at the callee, e.g. at `raise_exception` rather than at its '('.
    auto call = std::make_unique<CallExpr>(callee->location);
    call->callee = std::move(callee);
    DRIFT_ASSIGN_OR_RETURN(call->arguments, parse_call_arguments());
    return seal(std::move(call));
  }

  Expected<std::string> parse_dotted_name() {
    DRIFT_ASSIGN_OR_RETURN(std::string name, expect_identifier());
    while (skip_operator(".")) {
      DRIFT_ASSIGN_OR_RETURN(std::string part, expect_identifier());
      name += "." + part;
    }
    return name;
  }

  // `| name(args) | name ...` applied to `input` (null: the body of a filter section). With
  // `start_inline` the first filter has no leading '|'.
  Expected<ExprPtr> parse_filter_chain(ExprPtr input, bool start_inline) {
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

  Expected<ExprPtr> parse_test(ExprPtr input) {
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
                t.type == TokenType::kInteger || t.type == TokenType::kFloat ||
                is_operator(t, "[") || is_operator(t, "{")) &&
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

  Lexer lexer_;
  std::deque<Token> tokens_;
  std::optional<Error> lex_error_;
  size_t pos_ = 0;
  const ParseLimits& limits_;
  uint32_t nesting_ = 0;
  bool soft_ = false;   // inside an if or a conditional expression
  int loop_depth_ = 0;  // enclosing for loops in the current frame (break/continue need one)
  std::vector<MacroStmt*> macros_;  // macros being parsed, innermost last
  // For jinja2's unclosed-block messages: the tags of the statements being parsed and the end
  // tags each open body is looking for, innermost last.
  std::vector<std::string> tag_stack_;
  std::vector<std::vector<std::string_view>> end_tags_stack_;
};

}  // namespace

Expected<StmtList> parse_template(std::string_view source, const SyntaxOptions& syntax,
                                  const ParseLimits& limits) {
  Parser parser(source, syntax, limits);
  return parser.parse();
}

}  // namespace drift::jinja
