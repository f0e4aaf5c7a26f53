// The parser of parse_template (parser.h): a recursive-descent parser over the lexer's tokens,
// following jinja2's grammar. Shared by its three files, each one concept: parser.cc (the token
// stream, errors, the nesting and height limits), parser_statements.cc (tags: if, for, set, macro,
// ...), parser_expressions.cc (jinja2's expression grammar, loosest binding first). Not for use
// outside them.
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"
#include "util/error.h"

namespace drift::jinja {

class Parser {
 public:
  Parser(std::string_view source, const SyntaxOptions& syntax, const ParseLimits& limits)
      : lexer_(source, syntax, limits.max_nesting), limits_(limits) {}

  Expected<StmtList> parse();

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

  Status check_nesting();

  // ---- token stream ----

  // Token `i` of the template, lexed on demand. Tokens live in a deque, so references to them
  // stay valid while more are lexed.
  const Token& token(size_t i);
  const Token& current() { return token(pos_); }
  const Token& peek(size_t ahead = 1) { return token(pos_ + ahead); }
  const Token& advance();

  static bool is_operator(const Token& t, std::string_view op);
  static bool is_name(const Token& t, std::string_view name);
  bool skip_operator(std::string_view op);
  bool skip_name(std::string_view name);

  // How jinja2 names a token in messages: names and operators as written, others by kind.
  static std::string describe(const Token& t);

  Error fail(const Token& at, std::string_view message) const;

  // jinja2's message for a token other than `expected` (a description like the above).
  Error fail_expected(std::string_view expected);

  Status expect_operator(std::string_view op);

  Status expect(TokenType type);

  Expected<std::string> expect_identifier();

  // jinja2's message for an unknown tag (`name`) or the end of the template (empty `name`)
  // while blocks are open: which end tags it was looking for and which block is innermost.
  Error fail_unclosed(const Token& at, std::string_view name) const;

  Expected<ExprPtr> seal(ExprPtr node);

  // ---- statements ----

  // Parses statements until a block tag whose name is one of `end_tags` (left as the current
  // token, after its `{%`), or the end of the template when `end_tags` is empty.
  Expected<StmtList> subparse(std::initializer_list<std::string_view> end_tags);

  Expected<StmtList> subparse_body(std::initializer_list<std::string_view> end_tags);

  // The body of a block statement: the opening tag's `%}`, then statements up to one of
  // `end_tags`, whose name is left as the current token.
  Expected<StmtList> parse_body(std::initializer_list<std::string_view> end_tags);

  Expected<StmtPtr> parse_statement();

  Expected<StmtPtr> parse_tagged_statement(const Token& t);

  Expected<StmtPtr> parse_if();

  Expected<StmtPtr> parse_for();

  Expected<StmtPtr> parse_set();

  // A body rendered in its own frame (block set, macro, filter block, with): `if`-softness and
  // loop controls of the enclosing statements do not reach into it.
  Expected<StmtList> parse_scoped_body(std::initializer_list<std::string_view> end_tags);

  Expected<StmtPtr> parse_macro();

  Expected<StmtPtr> parse_filter_block();

  Expected<StmtPtr> parse_with();

  // Hugging Face's {% generation %} marks assistant text for training masks; rendering it is
  // rendering its body (in a frame of its own, as jinja2 runs it through a call block).
  Expected<StmtPtr> parse_generation();

  Expected<StmtPtr> parse_print();

  // Names, optionally separated by commas (for unpacking) and wrapped in parentheses, or with
  // `allow_namespace` a namespace attribute `ns.name`. `end_name` ends a trailing-comma list.
  Expected<AssignTarget> parse_assign_target(std::string_view end_name, bool allow_namespace);

  // ---- expressions (jinja2's grammar, loosest binding first) ----

  struct TupleOptions {
    bool with_condexpr = true;
    bool explicit_parentheses = false;
    std::string_view end_name;  // a name that also ends the tuple (e.g. 'recursive')
  };

  bool is_tuple_end(const TupleOptions& options);

  Expected<ExprPtr> parse_tuple(const TupleOptions& options);

  Expected<ExprPtr> parse_expression(bool with_condexpr);

  Expected<ExprPtr> parse_condexpr();

  Expected<ExprPtr> parse_or();

  Expected<ExprPtr> parse_and();

  Expected<ExprPtr> parse_not();

  Expected<ExprPtr> parse_compare();

  Expected<ExprPtr> parse_binary_chain(
      Expected<ExprPtr> (Parser::*operand)(),
      std::initializer_list<std::pair<std::string_view, BinaryOp>> ops);

  Expected<ExprPtr> parse_math1();

  Expected<ExprPtr> parse_concat();

  Expected<ExprPtr> parse_math2();

  Expected<ExprPtr> parse_pow();

  Expected<ExprPtr> parse_unary_with_filters() { return parse_unary(true); }

  Expected<ExprPtr> parse_unary(bool with_filter);

  Expected<ExprPtr> parse_primary();

  static Expected<ExprPtr> literal(const Token& t, Value v);

  Expected<ExprPtr> parse_list();

  Expected<ExprPtr> parse_dict();

  Expected<ExprPtr> parse_postfix(ExprPtr node);

  Expected<ExprPtr> parse_filter_expr(ExprPtr node);

  Expected<ExprPtr> parse_subscript(ExprPtr node);

  // One subscript: an expression, or a slice start:stop:step (which then owns `object`).
  Expected<ExprPtr> parse_subscribed(ExprPtr& object, SourceLocation location);

  Expected<CallArguments> parse_call_arguments();

  Expected<ExprPtr> parse_call(ExprPtr callee);

  Expected<std::string> parse_dotted_name();

  // `| name(args) | name ...` applied to `input` (null: the body of a filter section). With
  // `start_inline` the first filter has no leading '|'.
  Expected<ExprPtr> parse_filter_chain(ExprPtr input, bool start_inline);

  Expected<ExprPtr> parse_test(ExprPtr input);

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

}  // namespace drift::jinja
