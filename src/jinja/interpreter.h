// Runs a parsed template against a context, with jinja2's semantics as Hugging Face configures
// it (ImmutableSandboxedEnvironment, default Undefined, loop controls): Python-like values and
// operators, for-loop scopes that do not leak, macros that see their defining scope, and the
// sandbox limits of RenderLimits. One Interpreter serves one render; builtins reach back into it
// for calls, attribute look-ups and accounting.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/ast.h"
#include "jinja/render_options.h"
#include "jinja/value.h"
#include "util/error.h"

namespace drift::jinja {

// The variables of one frame. Lookups walk to the parent; assignments stay in the frame.
struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> variables;

  const Value* find_local(std::string_view name) const;
  void set(std::string_view name, Value value);
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  Interpreter(const RenderOptions& options, const Dict& context);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  Expected<std::string> render(const StmtList& body);

  // ---- services for builtins ----

  const RenderOptions& options() const { return options_; }
  const RenderLimits& limits() const { return options_.limits; }
  std::tm now() const;

  // Calls a function value (builtin, bound method or macro).
  Expected<Value> call(const Value& callee, CallArgs& args);
  Expected<Value> apply_filter(std::string_view name, const Value& input, CallArgs& args);
  Expected<bool> apply_test(std::string_view name, const Value& input, CallArgs& args);
  // jinja2's getattr (`x.name`) and getitem (`x[key]`): a missing attribute or key is an
  // undefined value; only undefined itself fails.
  Expected<Value> get_attribute(const Value& object, std::string_view name);
  Expected<Value> get_item(const Value& object, const Value& key);
  // The items a for loop over `iterable` visits: list items, dict keys, string characters;
  // nothing for undefined. Other values are not iterable (an error).
  Expected<std::shared_ptr<const List>> iterate(const Value& iterable);

  // Accounts work against max_steps.
  Status charge(uint64_t steps);
  // Fails if a string or list of `size` bytes/items would exceed the limits.
  Status check_size(size_t size) const;
  // A list built by a builtin, with its nesting checked against max_value_depth.
  Expected<Value> make_list(std::vector<Value> items, ListKind kind = ListKind::kList);
  // A namespace, tracked so that reference cycles through namespaces are broken after the render.
  Value make_namespace(Dict attributes);

 private:
  friend struct MacroClosure;
  enum class Flow { kNormal, kBreak, kContinue };

  Expected<Flow> execute(const StmtList& body, const ScopePtr& scope, std::string& out);
  Expected<Flow> execute(const Stmt& stmt, const ScopePtr& scope, std::string& out);
  Expected<Flow> execute_for(const ForStmt& stmt, const ScopePtr& scope, std::string& out);
  Status execute_macro_definition(const MacroStmt& stmt, const ScopePtr& scope);
  Expected<std::string> render_block(const StmtList& body, const ScopePtr& parent);
  Status assign(const AssignTarget& target, Value value, Scope& scope);
  Status emit(std::string& out, std::string_view text);

  Expected<Value> evaluate(const Expr& expr, const Scope& scope);
  // Dispatches on the node's kind to one of the evaluators below.
  Expected<Value> evaluate_node(const Expr& expr, const Scope& scope);
  Expected<Value> evaluate_sequence(const SequenceExpr& sequence, const Scope& scope);
  Expected<Value> evaluate_dict(const DictExpr& dict_expr, const Scope& scope);
  Expected<Value> evaluate_attribute(const AttributeExpr& attribute, const Scope& scope);
  Expected<Value> evaluate_item(const ItemExpr& item, const Scope& scope);
  Expected<Value> evaluate_slice(const SliceExpr& s, const Scope& scope);
  Expected<Value> evaluate_call(const CallExpr& call_expr, const Scope& scope);
  Expected<Value> evaluate_filter_expr(const FilterExpr& filter, const Scope& scope);
  Expected<Value> evaluate_test(const TestExpr& test, const Scope& scope);
  Expected<Value> evaluate_unary(const UnaryExpr& unary, const Scope& scope);  // -x, +x, not x
  Expected<Value> evaluate_binary(const BinaryExpr& binary, const Scope& scope);
  Expected<Value> evaluate_logical(const LogicalExpr& logical, const Scope& scope);
  Expected<Value> evaluate_concat(const ConcatExpr& concat, const Scope& scope);
  Expected<Value> evaluate_conditional(const ConditionalExpr& conditional, const Scope& scope);
  Expected<CallArgs> evaluate_arguments(const CallArguments& args, const Scope& scope);
  Expected<Value> evaluate_filter(const FilterExpr& filter, const Scope& scope,
                                  const Value* block_input);
  Expected<Value> evaluate_compare(const CompareExpr& compare, const Scope& scope);
  Value lookup(std::string_view name, const Scope& scope) const;
  Expected<Value> call_macro(const MacroStmt& macro, const ScopePtr& parent, CallArgs& args);
  Expected<Value> slice(const Value& object, const Value& start, const Value& stop,
                        const Value& step);
  Status charge_for(const Value& v);
  // Adds the location to an error the first time it passes a node; afterwards unchanged.
  Error locate(const SourceLocation& location, Error error);

  const RenderOptions& options_;
  const Dict& context_;
  Dict globals_;
  uint64_t steps_ = 0;
  uint32_t eval_depth_ = 0;
  uint32_t call_depth_ = 0;
  bool error_located_ = false;
  std::vector<std::shared_ptr<Dict>> namespaces_;
  std::vector<ScopePtr> macro_scopes_;  // scopes that define a macro (see the destructor)
};

}  // namespace drift::jinja
