// The syntax tree of a parsed template: expressions and statements, each with the source location
// errors are reported at. Built once by the parser and only read afterwards, so one template can
// render on many threads at once.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/lexer.h"
#include "jinja/value.h"

namespace drift::jinja {

// ---- expressions -------------------------------------------------------------------------------

enum class ExprKind : uint8_t {
  kLiteral,      // 'text', 42, 1.5, true, none
  kName,         // messages
  kList,         // [a, b]
  kTuple,        // (a, b) or a, b
  kDict,         // {'k': v}
  kAttribute,    // x.name
  kItem,         // x[key]
  kSlice,        // x[start:stop:step]
  kCall,         // f(a, k=b)
  kFilter,       // x | name(args)
  kTest,         // x is name(args)
  kNegate,       // -x
  kPlus,         // +x
  kNot,          // not x
  kBinary,       // + - * / // % **
  kCompare,      // == != < <= > >= in, not in; chained like Python
  kAnd,          // a and b (returns an operand, as Python does)
  kOr,           // a or b
  kConcat,       // a ~ b ~ c
  kConditional,  // a if cond else b
};

enum class BinaryOp : uint8_t {
  kAdd,
  kSubtract,
  kMultiply,
  kDivide,
  kFloorDivide,
  kModulo,
  kPower
};
enum class CompareOp : uint8_t {
  kEqual,
  kNotEqual,
  kLess,
  kLessEqual,
  kGreater,
  kGreaterEqual,
  kIn,
  kNotIn
};

struct Expr {
  Expr(ExprKind kind, SourceLocation location) : kind(kind), location(location) {}
  virtual ~Expr() = default;

  ExprKind kind;
  // Longest path to a leaf, counting this node: the parser bounds it so that evaluating or
  // destroying the tree cannot exhaust the stack.
  uint32_t height = 1;
  SourceLocation location;
};
using ExprPtr = std::unique_ptr<Expr>;

struct LiteralExpr : Expr {
  LiteralExpr(SourceLocation loc, Value v) : Expr(ExprKind::kLiteral, loc), value(std::move(v)) {}
  Value value;
};

struct NameExpr : Expr {
  NameExpr(SourceLocation loc, std::string n) : Expr(ExprKind::kName, loc), name(std::move(n)) {}
  std::string name;
};

struct SequenceExpr : Expr {  // kList or kTuple
  using Expr::Expr;
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  explicit DictExpr(SourceLocation loc) : Expr(ExprKind::kDict, loc) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

struct AttributeExpr : Expr {
  AttributeExpr(SourceLocation loc, ExprPtr o, std::string n)
      : Expr(ExprKind::kAttribute, loc), object(std::move(o)), name(std::move(n)) {}
  ExprPtr object;
  std::string name;
};

struct ItemExpr : Expr {
  ItemExpr(SourceLocation loc, ExprPtr o, ExprPtr k)
      : Expr(ExprKind::kItem, loc), object(std::move(o)), key(std::move(k)) {}
  ExprPtr object;
  ExprPtr key;
};

struct SliceExpr : Expr {
  explicit SliceExpr(SourceLocation loc) : Expr(ExprKind::kSlice, loc) {}
  ExprPtr object;
  ExprPtr start, stop, step;  // each may be null
};

struct CallArguments {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
};

struct CallExpr : Expr {
  explicit CallExpr(SourceLocation loc) : Expr(ExprKind::kCall, loc) {}
  ExprPtr callee;
  CallArguments arguments;
};

// A filter application. In a filter section or block set, the innermost filter's input is null
// and stands for the rendered body.
struct FilterExpr : Expr {
  explicit FilterExpr(SourceLocation loc) : Expr(ExprKind::kFilter, loc) {}
  ExprPtr input;
  std::string name;
  CallArguments arguments;
};

struct TestExpr : Expr {
  explicit TestExpr(SourceLocation loc) : Expr(ExprKind::kTest, loc) {}
  ExprPtr input;
  std::string name;
  CallArguments arguments;
};

struct UnaryExpr : Expr {  // kNegate, kPlus, kNot
  UnaryExpr(ExprKind kind, SourceLocation loc, ExprPtr o)
      : Expr(kind, loc), operand(std::move(o)) {}
  ExprPtr operand;
};

struct BinaryExpr : Expr {
  BinaryExpr(SourceLocation loc, BinaryOp o, ExprPtr l, ExprPtr r)
      : Expr(ExprKind::kBinary, loc), op(o), left(std::move(l)), right(std::move(r)) {}
  BinaryOp op;
  ExprPtr left, right;
};

struct CompareExpr : Expr {
  explicit CompareExpr(SourceLocation loc) : Expr(ExprKind::kCompare, loc) {}
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

struct LogicalExpr : Expr {  // kAnd, kOr
  LogicalExpr(ExprKind kind, SourceLocation loc, ExprPtr l, ExprPtr r)
      : Expr(kind, loc), left(std::move(l)), right(std::move(r)) {}
  ExprPtr left, right;
};

struct ConcatExpr : Expr {
  explicit ConcatExpr(SourceLocation loc) : Expr(ExprKind::kConcat, loc) {}
  std::vector<ExprPtr> parts;
};

struct ConditionalExpr : Expr {
  explicit ConditionalExpr(SourceLocation loc) : Expr(ExprKind::kConditional, loc) {}
  ExprPtr condition, then_value;
  ExprPtr else_value;  // may be null: then the expression is undefined when false
};

// ---- statements --------------------------------------------------------------------------------

enum class StmtKind : uint8_t {
  kText,         // template data between tags
  kOutput,       // {{ expr }}
  kIf,           // {% if %}{% elif %}{% else %}{% endif %}
  kFor,          // {% for x in xs if cond %}...{% else %}...{% endfor %}
  kSet,          // {% set target = expr %}
  kSetBlock,     // {% set target | filters %}...{% endset %}
  kMacro,        // {% macro name(params) %}...{% endmacro %}
  kFilterBlock,  // {% filter name %}...{% endfilter %}
  kWith,         // {% with a = 1 %}...{% endwith %}
  kScopedBlock,  // a body with its own scope: Hugging Face's {% generation %}
  kBreak,        // {% break %}
  kContinue,     // {% continue %}
};

struct Stmt {
  Stmt(StmtKind kind, SourceLocation location) : kind(kind), location(location) {}
  virtual ~Stmt() = default;
  StmtKind kind;
  SourceLocation location;
};
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

// Where `set` and `for` store values: a name, several names (unpacking), or a namespace
// attribute (`ns.count`).
struct AssignTarget {
  enum class Kind : uint8_t { kName, kNames, kNamespaceAttribute };
  Kind kind = Kind::kName;
  std::vector<std::string> names;  // kName: one; kNames: each; kNamespaceAttribute: the namespace
  std::string attribute;
  SourceLocation location;
};

struct TextStmt : Stmt {
  TextStmt(SourceLocation loc, std::string t) : Stmt(StmtKind::kText, loc), text(std::move(t)) {}
  std::string text;
};

struct OutputStmt : Stmt {
  explicit OutputStmt(SourceLocation loc) : Stmt(StmtKind::kOutput, loc) {}
  std::vector<ExprPtr> values;
};

struct IfStmt : Stmt {
  explicit IfStmt(SourceLocation loc) : Stmt(StmtKind::kIf, loc) {}
  struct Branch {
    ExprPtr condition;
    StmtList body;
  };
  std::vector<Branch> branches;  // if, then each elif
  StmtList else_body;
};

struct ForStmt : Stmt {
  explicit ForStmt(SourceLocation loc) : Stmt(StmtKind::kFor, loc) {}
  AssignTarget target;
  ExprPtr iterable;
  ExprPtr filter;  // may be null
  StmtList body;
  StmtList else_body;
};

struct SetStmt : Stmt {
  explicit SetStmt(SourceLocation loc) : Stmt(StmtKind::kSet, loc) {}
  AssignTarget target;
  ExprPtr value;
};

struct SetBlockStmt : Stmt {
  explicit SetBlockStmt(SourceLocation loc) : Stmt(StmtKind::kSetBlock, loc) {}
  AssignTarget target;
  ExprPtr filter;  // may be null; a FilterExpr chain applied to the rendered body
  StmtList body;
};

struct MacroStmt : Stmt {
  explicit MacroStmt(SourceLocation loc) : Stmt(StmtKind::kMacro, loc) {}
  std::string name;
  std::vector<std::string> parameters;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() parameters
  StmtList body;
  // jinja2 accepts extra arguments only if the body reads `varargs` / `kwargs`.
  bool reads_varargs = false;
  bool reads_kwargs = false;
};

struct FilterBlockStmt : Stmt {
  explicit FilterBlockStmt(SourceLocation loc) : Stmt(StmtKind::kFilterBlock, loc) {}
  ExprPtr filter;  // FilterExpr chain applied to the rendered body
  StmtList body;
};

struct WithStmt : Stmt {
  explicit WithStmt(SourceLocation loc) : Stmt(StmtKind::kWith, loc) {}
  std::vector<std::pair<AssignTarget, ExprPtr>> assignments;
  StmtList body;
};

struct ScopedBlockStmt : Stmt {
  explicit ScopedBlockStmt(SourceLocation loc) : Stmt(StmtKind::kScopedBlock, loc) {}
  StmtList body;
};

struct LoopControlStmt : Stmt {  // kBreak, kContinue
  using Stmt::Stmt;
};

}  // namespace drift::jinja
