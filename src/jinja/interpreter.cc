#include "jinja/interpreter.h"

#include <fmt/format.h>

#include <chrono>

#include "jinja/builtins.h"
#include "jinja/error_kind.h"
#include "jinja/operators.h"
#include "jinja/pyrepr.h"

namespace drift::jinja {

const Value* Scope::find_local(std::string_view name) const {
  for (const auto& [n, v] : variables) {
    if (n == name) return &v;
  }
  return nullptr;
}

void Scope::set(std::string_view name, Value value) {
  for (auto& [n, v] : variables) {
    if (n == name) {
      v = std::move(value);
      return;
    }
  }
  variables.emplace_back(std::string(name), std::move(value));
}

namespace {

// Counts one level of a bounded resource for as long as it lives.
class DepthGuard {
 public:
  explicit DepthGuard(uint32_t& depth) : depth_(depth) { ++depth_; }
  ~DepthGuard() { --depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  uint32_t& depth_;
};

// Bytes of built strings per step charged.
constexpr size_t kBytesPerStep = 64;
// A macro call allocates a scope, binds arguments and renders into its own buffer: it costs
// about as much as this many simple steps.
constexpr uint64_t kMacroCallSteps = 20;

std::tm system_local_time() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

}  // namespace

// A macro value's function: the macro and the scope it was defined in, which its body's names
// resolve against when called (late binding, as in jinja2).
struct MacroClosure {
  const MacroStmt* macro;
  ScopePtr scope;

  Expected<Value> operator()(Interpreter& interpreter, CallArgs& args) const {
    return interpreter.call_macro(*macro, scope, args);
  }
};

Interpreter::Interpreter(const RenderOptions& options, const Dict& context)
    : options_(options), context_(context), globals_(make_globals()) {}

Interpreter::~Interpreter() {
  // Reference cycles can only run through namespaces (`{% set ns.self = ns %}`) and through
  // scopes that hold a macro which holds the scope. Emptying every such object breaks every
  // cycle; keeping them alive until all are empty also keeps long chains of them from being
  // destroyed recursively.
  for (const auto& ns : namespaces_) ns->clear();
  for (const auto& scope : macro_scopes_) scope->variables.clear();
}

std::tm Interpreter::now() const { return options_.clock ? options_.clock() : system_local_time(); }

Expected<std::string> Interpreter::render(const StmtList& body) {
  auto scope = std::make_shared<Scope>();
  std::string out;
  DRIFT_ASSIGN_OR_RETURN(Flow flow, execute(body, scope, out));
  (void)flow;
  return out;
}

Status Interpreter::charge(uint64_t steps) {
  steps_ += steps;
  if (steps_ > limits().max_steps) {
    return make_kind_error(ErrorKind::kLimit,
                           "the template exceeded its budget of {} evaluation steps (an endless or "
                           "very long loop?)",
                           limits().max_steps);
  }
  return Status::Ok();
}

Status Interpreter::check_size(size_t size) const {
  if (size > limits().max_output_bytes) {
    return make_kind_error(ErrorKind::kLimit,
                           "the template built a value of {} bytes or items, over the limit of {}",
                           size, limits().max_output_bytes);
  }
  return Status::Ok();
}

Status Interpreter::charge_for(const Value& v) {
  if (v.is_string()) {
    DRIFT_RETURN_IF_ERROR(check_size(v.as_string().size()));
    return charge(v.as_string().size() / kBytesPerStep);
  }
  if (v.is_list()) return charge(v.as_list().items.size());
  if (v.is_dict()) return charge(v.as_dict().size());
  return Status::Ok();
}

Expected<Value> Interpreter::make_list(std::vector<Value> items, ListKind kind) {
  Value list = Value::list(std::move(items), kind);
  if (list.depth() > limits().max_value_depth) {
    return make_kind_error(ErrorKind::kLimit, "lists and dicts nest more than {} levels deep",
                           limits().max_value_depth);
  }
  DRIFT_RETURN_IF_ERROR(charge_for(list));
  return list;
}

Value Interpreter::make_namespace(Dict attributes) {
  Value ns = Value::new_namespace(std::move(attributes));
  namespaces_.push_back(ns.namespace_ptr());
  return ns;
}

Error Interpreter::locate(const SourceLocation& location, Error error) {
  if (error_located_) return error;
  error_located_ = true;
  return Error{fmt::format("{}: {}", describe_location(location), error.message), error.code};
}

Status Interpreter::emit(std::string& out, std::string_view text) {
  if (out.size() + text.size() > limits().max_output_bytes) {
    return make_kind_error(ErrorKind::kLimit, "the template output exceeds the limit of {} bytes",
                           limits().max_output_bytes);
  }
  out.append(text);
  return charge(text.size() / kBytesPerStep);
}

// ---- statements ---------------------------------------------------------------------------------

Expected<Interpreter::Flow> Interpreter::execute(const StmtList& body, const ScopePtr& scope,
                                                 std::string& out) {
  for (const StmtPtr& stmt : body) {
    DRIFT_ASSIGN_OR_RETURN(Flow flow, execute(*stmt, scope, out));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Expected<Interpreter::Flow> Interpreter::execute(const Stmt& stmt, const ScopePtr& scope,
                                                 std::string& out) {
  DepthGuard depth(eval_depth_);
  auto fail = [&](Error e) { return locate(stmt.location, std::move(e)); };
  if (eval_depth_ > limits().max_eval_depth) {
    return fail(make_kind_error(ErrorKind::kLimit,
                                "the template nests more than {} levels deep at run time",
                                limits().max_eval_depth));
  }
  if (Status s = charge(1); !s.ok()) return fail(s.error());

  switch (stmt.kind) {
    case StmtKind::kText:
      if (Status s = emit(out, static_cast<const TextStmt&>(stmt).text); !s.ok()) {
        return fail(s.error());
      }
      return Flow::kNormal;
    case StmtKind::kOutput:
      for (const ExprPtr& expr : static_cast<const OutputStmt&>(stmt).values) {
        DRIFT_ASSIGN_OR_RETURN(Value v, evaluate(*expr, *scope));
        Status s = v.is_string() ? emit(out, v.as_string()) : emit(out, py_str(v));
        if (!s.ok()) return fail(s.error());
      }
      return Flow::kNormal;
    case StmtKind::kIf: {
      const auto& if_stmt = static_cast<const IfStmt&>(stmt);
      for (const IfStmt::Branch& branch : if_stmt.branches) {
        DRIFT_ASSIGN_OR_RETURN(Value condition, evaluate(*branch.condition, *scope));
        if (truthy(condition)) return execute(branch.body, scope, out);
      }
      return execute(if_stmt.else_body, scope, out);
    }
    case StmtKind::kFor:
      return execute_for(static_cast<const ForStmt&>(stmt), scope, out);
    case StmtKind::kSet: {
      const auto& set = static_cast<const SetStmt&>(stmt);
      DRIFT_ASSIGN_OR_RETURN(Value v, evaluate(*set.value, *scope));
      if (Status s = assign(set.target, std::move(v), *scope); !s.ok()) return fail(s.error());
      return Flow::kNormal;
    }
    case StmtKind::kSetBlock: {
      const auto& set = static_cast<const SetBlockStmt&>(stmt);
      DRIFT_ASSIGN_OR_RETURN(std::string text, render_block(set.body, scope));
      Value v = Value::string(std::move(text));
      if (set.filter) {
        DRIFT_ASSIGN_OR_RETURN(
            v, evaluate_filter(static_cast<const FilterExpr&>(*set.filter), *scope, &v));
      }
      if (Status s = assign(set.target, std::move(v), *scope); !s.ok()) return fail(s.error());
      return Flow::kNormal;
    }
    case StmtKind::kMacro:
      if (Status s = execute_macro_definition(static_cast<const MacroStmt&>(stmt), scope);
          !s.ok()) {
        return fail(s.error());
      }
      return Flow::kNormal;
    case StmtKind::kFilterBlock: {
      const auto& block = static_cast<const FilterBlockStmt&>(stmt);
      DRIFT_ASSIGN_OR_RETURN(std::string text, render_block(block.body, scope));
      const Value input = Value::string(std::move(text));
      DRIFT_ASSIGN_OR_RETURN(
          Value v, evaluate_filter(static_cast<const FilterExpr&>(*block.filter), *scope, &input));
      Status s = v.is_string() ? emit(out, v.as_string()) : emit(out, py_str(v));
      if (!s.ok()) return fail(s.error());
      return Flow::kNormal;
    }
    case StmtKind::kWith: {
      const auto& with = static_cast<const WithStmt&>(stmt);
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      for (const auto& [target, expr] : with.assignments) {
        DRIFT_ASSIGN_OR_RETURN(Value v, evaluate(*expr, *scope));
        if (Status s = assign(target, std::move(v), *inner); !s.ok()) return fail(s.error());
      }
      return execute(with.body, inner, out);
    }
    case StmtKind::kScopedBlock: {
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      return execute(static_cast<const ScopedBlockStmt&>(stmt).body, inner, out);
    }
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

Expected<std::string> Interpreter::render_block(const StmtList& body, const ScopePtr& parent) {
  auto inner = std::make_shared<Scope>();
  inner->parent = parent;
  std::string text;
  DRIFT_ASSIGN_OR_RETURN(Flow flow, execute(body, inner, text));
  (void)flow;
  return text;
}

// Each iteration runs in a fresh scope whose parent is the loop's, so assignments in the body
// neither leak out of the loop nor carry over to the next iteration (jinja2's semantics).
Expected<Interpreter::Flow> Interpreter::execute_for(const ForStmt& stmt, const ScopePtr& scope,
                                                     std::string& out) {
  auto fail = [&](Error e) { return locate(stmt.location, std::move(e)); };
  DRIFT_ASSIGN_OR_RETURN(Value iterable, evaluate(*stmt.iterable, *scope));
  auto items = iterate(iterable);
  if (!items.ok()) return fail(items.error());
  std::shared_ptr<const List> sequence = std::move(items).value();

  if (stmt.filter) {
    std::vector<Value> kept;
    for (const Value& item : sequence->items) {
      if (Status s = charge(1); !s.ok()) return fail(s.error());
      auto probe = std::make_shared<Scope>();
      probe->parent = scope;
      if (Status s = assign(stmt.target, item, *probe); !s.ok()) return fail(s.error());
      DRIFT_ASSIGN_OR_RETURN(Value keep, evaluate(*stmt.filter, *probe));
      if (truthy(keep)) kept.push_back(item);
    }
    auto filtered = std::make_shared<List>();
    filtered->items = std::move(kept);
    sequence = std::move(filtered);
  }

  if (sequence->items.empty()) {
    auto inner = std::make_shared<Scope>();
    inner->parent = scope;
    DRIFT_ASSIGN_OR_RETURN(Flow flow, execute(stmt.else_body, inner, out));
    (void)flow;
    return Flow::kNormal;
  }
  // One `loop` object for the whole loop, advanced in place, as jinja2's LoopContext is.
  auto loop = std::make_shared<LoopInfo>(LoopInfo{0, 0, sequence});
  const Value loop_value = Value::loop(loop);
  ScopePtr iteration;
  for (size_t i = 0; i < sequence->items.size(); ++i) {
    if (Status s = charge(1); !s.ok()) return fail(s.error());
    // A fresh scope per iteration; the previous one is recycled unless something (a macro
    // defined in the body) still refers to it.
    if (iteration && iteration.use_count() == 1) {
      iteration->variables.clear();
    } else {
      iteration = std::make_shared<Scope>();
      iteration->parent = scope;
    }
    if (Status s = assign(stmt.target, sequence->items[i], *iteration); !s.ok()) {
      return fail(s.error());
    }
    loop->index0 = static_cast<int64_t>(i);
    iteration->set("loop", loop_value);
    DRIFT_ASSIGN_OR_RETURN(Flow flow, execute(stmt.body, iteration, out));
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Status Interpreter::execute_macro_definition(const MacroStmt& stmt, const ScopePtr& scope) {
  scope->set(stmt.name, Value::function(stmt.name, MacroClosure{&stmt, scope}));
  macro_scopes_.push_back(scope);
  return Status::Ok();
}

Status Interpreter::assign(const AssignTarget& target, Value value, Scope& scope) {
  switch (target.kind) {
    case AssignTarget::Kind::kName:
      scope.set(target.names.front(), std::move(value));
      return Status::Ok();
    case AssignTarget::Kind::kNames: {
      DRIFT_ASSIGN_OR_RETURN(std::shared_ptr<const List> items, iterate(value));
      const size_t want = target.names.size();
      const size_t got = items->items.size();
      if (got < want) {
        return make_error("not enough values to unpack (expected {}, got {})", want, got);
      }
      if (got > want) return make_error("too many values to unpack (expected {})", want);
      for (size_t i = 0; i < want; ++i) scope.set(target.names[i], items->items[i]);
      return Status::Ok();
    }
    case AssignTarget::Kind::kNamespaceAttribute: {
      const Value ns = lookup(target.names.front(), scope);
      if (!ns.is_namespace()) {
        return make_error("cannot assign attribute on non-namespace object");
      }
      if (!target.attribute.empty() && target.attribute.front() == '_') {
        return make_error(
            "Chat templates cannot store underscore-prefixed attributes on a namespace, but got "
            "'{}'. Please rename the attribute.",
            target.attribute);
      }
      ns.namespace_attributes().set(target.attribute, std::move(value));
      return Status::Ok();
    }
  }
  return Status::Ok();
}

// ---- expressions --------------------------------------------------------------------------------

Value Interpreter::lookup(std::string_view name, const Scope& scope) const {
  for (const Scope* s = &scope; s; s = s->parent.get()) {
    if (const Value* v = s->find_local(name)) return *v;
  }
  if (const Value* v = context_.find(name)) return *v;
  if (const Value* v = globals_.find(name)) return *v;
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

Expected<Value> Interpreter::evaluate(const Expr& expr, const Scope& scope) {
  DepthGuard depth(eval_depth_);
  if (eval_depth_ > limits().max_eval_depth) {
    return locate(expr.location,
                  make_kind_error(ErrorKind::kLimit,
                                  "the template nests more than {} levels deep at run "
                                  "time",
                                  limits().max_eval_depth));
  }
  if (Status s = charge(1); !s.ok()) return locate(expr.location, s.error());
  auto result = evaluate_node(expr, scope);
  if (!result.ok()) return locate(expr.location, result.error());
  if (result->depth() > limits().max_value_depth) {
    return locate(expr.location, make_kind_error(ErrorKind::kLimit,
                                                 "lists and dicts nest more than {} levels deep",
                                                 limits().max_value_depth));
  }
  return result;
}

Expected<CallArgs> Interpreter::evaluate_arguments(const CallArguments& args, const Scope& scope) {
  CallArgs out;
  out.positional.reserve(args.positional.size());
  for (const ExprPtr& e : args.positional) {
    DRIFT_ASSIGN_OR_RETURN(Value v, evaluate(*e, scope));
    out.positional.push_back(std::move(v));
  }
  for (const auto& [name, e] : args.keywords) {
    DRIFT_ASSIGN_OR_RETURN(Value v, evaluate(*e, scope));
    out.keywords.emplace_back(name, std::move(v));
  }
  return out;
}

Expected<Value> Interpreter::evaluate_filter(const FilterExpr& filter, const Scope& scope,
                                             const Value* block_input) {
  Value input;
  if (filter.input) {
    if (filter.input->kind == ExprKind::kFilter) {
      DRIFT_ASSIGN_OR_RETURN(input, evaluate_filter(static_cast<const FilterExpr&>(*filter.input),
                                                    scope, block_input));
    } else {
      DRIFT_ASSIGN_OR_RETURN(input, evaluate(*filter.input, scope));
    }
  } else if (block_input) {
    input = *block_input;
  }
  DRIFT_ASSIGN_OR_RETURN(CallArgs args, evaluate_arguments(filter.arguments, scope));
  auto result = apply_filter(filter.name, input, args);
  if (!result.ok()) return locate(filter.location, result.error());
  return result;
}

Expected<Value> Interpreter::evaluate_compare(const CompareExpr& compare, const Scope& scope) {
  DRIFT_ASSIGN_OR_RETURN(Value left, evaluate(*compare.first, scope));
  for (const auto& [op, operand] : compare.rest) {
    DRIFT_ASSIGN_OR_RETURN(Value right, evaluate(*operand, scope));
    bool holds = false;
    switch (op) {
      case CompareOp::kEqual:
        holds = equals(left, right);
        break;
      case CompareOp::kNotEqual:
        holds = !equals(left, right);
        break;
      case CompareOp::kIn:
      case CompareOp::kNotIn: {
        DRIFT_ASSIGN_OR_RETURN(bool found, contains(right, left));
        holds = (op == CompareOp::kIn) == found;
        break;
      }
      default: {
        if (left.is_undefined()) return undefined_error(left);
        if (right.is_undefined()) return undefined_error(right);
        DRIFT_ASSIGN_OR_RETURN(int order, jinja::compare(left, right));
        holds = op == CompareOp::kLess        ? order < 0
                : op == CompareOp::kLessEqual ? order <= 0
                : op == CompareOp::kGreater   ? order > 0
                                              : order >= 0;
      }
    }
    if (!holds) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Expected<Value> Interpreter::evaluate_node(const Expr& expr, const Scope& scope) {
  // Rule: one evaluator per kind of node; this switch only picks it.
  switch (expr.kind) {
    case ExprKind::kLiteral:
      return static_cast<const LiteralExpr&>(expr).value;
    case ExprKind::kName:
      return lookup(static_cast<const NameExpr&>(expr).name, scope);
    case ExprKind::kList:
    case ExprKind::kTuple:
      return evaluate_sequence(static_cast<const SequenceExpr&>(expr), scope);
    case ExprKind::kDict:
      return evaluate_dict(static_cast<const DictExpr&>(expr), scope);
    case ExprKind::kAttribute:
      return evaluate_attribute(static_cast<const AttributeExpr&>(expr), scope);
    case ExprKind::kItem:
      return evaluate_item(static_cast<const ItemExpr&>(expr), scope);
    case ExprKind::kSlice:
      return evaluate_slice(static_cast<const SliceExpr&>(expr), scope);
    case ExprKind::kCall:
      return evaluate_call(static_cast<const CallExpr&>(expr), scope);
    case ExprKind::kFilter:
      return evaluate_filter_expr(static_cast<const FilterExpr&>(expr), scope);
    case ExprKind::kTest:
      return evaluate_test(static_cast<const TestExpr&>(expr), scope);
    case ExprKind::kNegate:
    case ExprKind::kPlus:
    case ExprKind::kNot:
      return evaluate_unary(static_cast<const UnaryExpr&>(expr), scope);
    case ExprKind::kBinary:
      return evaluate_binary(static_cast<const BinaryExpr&>(expr), scope);
    case ExprKind::kCompare:
      return evaluate_compare(static_cast<const CompareExpr&>(expr), scope);
    case ExprKind::kAnd:
    case ExprKind::kOr:
      return evaluate_logical(static_cast<const LogicalExpr&>(expr), scope);
    case ExprKind::kConcat:
      return evaluate_concat(static_cast<const ConcatExpr&>(expr), scope);
    case ExprKind::kConditional:
      return evaluate_conditional(static_cast<const ConditionalExpr&>(expr), scope);
  }
  return Value();
}

Expected<Value> Interpreter::evaluate_sequence(const SequenceExpr& sequence, const Scope& scope) {
  std::vector<Value> items;
  for (const ExprPtr& item : sequence.items) {
    DRIFT_ASSIGN_OR_RETURN(Value v, evaluate(*item, scope));
    items.push_back(std::move(v));
  }
  return make_list(std::move(items),
                   sequence.kind == ExprKind::kList ? ListKind::kList : ListKind::kTuple);
}

Expected<Value> Interpreter::evaluate_dict(const DictExpr& dict_expr, const Scope& scope) {
  Dict dict;
  for (const auto& [key_expr, value_expr] : dict_expr.items) {
    DRIFT_ASSIGN_OR_RETURN(Value key, evaluate(*key_expr, scope));
    DRIFT_ASSIGN_OR_RETURN(Value value, evaluate(*value_expr, scope));
    if (!is_hashable_key(key)) return make_error("unhashable type: '{}'", type_name(key));
    dict.set(std::move(key), std::move(value));
  }
  Value v = Value::dict(std::move(dict));
  DRIFT_RETURN_IF_ERROR(charge_for(v));
  return v;
}

Expected<Value> Interpreter::evaluate_attribute(const AttributeExpr& attribute,
                                                const Scope& scope) {
  DRIFT_ASSIGN_OR_RETURN(Value object, evaluate(*attribute.object, scope));
  return get_attribute(object, attribute.name);
}

Expected<Value> Interpreter::evaluate_item(const ItemExpr& item, const Scope& scope) {
  DRIFT_ASSIGN_OR_RETURN(Value object, evaluate(*item.object, scope));
  DRIFT_ASSIGN_OR_RETURN(Value key, evaluate(*item.key, scope));
  return get_item(object, key);
}

Expected<Value> Interpreter::evaluate_slice(const SliceExpr& s, const Scope& scope) {
  DRIFT_ASSIGN_OR_RETURN(Value object, evaluate(*s.object, scope));
  Value start = Value::none(), stop = Value::none(), step = Value::none();
  if (s.start) {
    DRIFT_ASSIGN_OR_RETURN(start, evaluate(*s.start, scope));
  }
  if (s.stop) {
    DRIFT_ASSIGN_OR_RETURN(stop, evaluate(*s.stop, scope));
  }
  if (s.step) {
    DRIFT_ASSIGN_OR_RETURN(step, evaluate(*s.step, scope));
  }
  return slice(object, start, stop, step);
}

Expected<Value> Interpreter::evaluate_call(const CallExpr& call_expr, const Scope& scope) {
  DRIFT_ASSIGN_OR_RETURN(Value callee, evaluate(*call_expr.callee, scope));
  DRIFT_ASSIGN_OR_RETURN(CallArgs args, evaluate_arguments(call_expr.arguments, scope));
  DRIFT_ASSIGN_OR_RETURN(Value result, call(callee, args));
  DRIFT_RETURN_IF_ERROR(charge_for(result));
  return result;
}

Expected<Value> Interpreter::evaluate_filter_expr(const FilterExpr& filter, const Scope& scope) {
  DRIFT_ASSIGN_OR_RETURN(Value result, evaluate_filter(filter, scope, nullptr));
  DRIFT_RETURN_IF_ERROR(charge_for(result));
  return result;
}

Expected<Value> Interpreter::evaluate_test(const TestExpr& test, const Scope& scope) {
  DRIFT_ASSIGN_OR_RETURN(Value input, evaluate(*test.input, scope));
  DRIFT_ASSIGN_OR_RETURN(CallArgs args, evaluate_arguments(test.arguments, scope));
  DRIFT_ASSIGN_OR_RETURN(bool passed, apply_test(test.name, input, args));
  return Value::boolean(passed);
}

Expected<Value> Interpreter::evaluate_unary(const UnaryExpr& unary, const Scope& scope) {
  DRIFT_ASSIGN_OR_RETURN(Value operand, evaluate(*unary.operand, scope));
  if (unary.kind == ExprKind::kNot) return Value::boolean(!truthy(operand));
  return unary_operation(unary.kind, operand);
}

Expected<Value> Interpreter::evaluate_binary(const BinaryExpr& binary, const Scope& scope) {
  DRIFT_ASSIGN_OR_RETURN(Value left, evaluate(*binary.left, scope));
  DRIFT_ASSIGN_OR_RETURN(Value right, evaluate(*binary.right, scope));
  DRIFT_ASSIGN_OR_RETURN(Value result, binary_operation(binary.op, left, right, limits()));
  DRIFT_RETURN_IF_ERROR(charge_for(result));
  return result;
}

Expected<Value> Interpreter::evaluate_logical(const LogicalExpr& logical, const Scope& scope) {
  // Python's and/or return one of their operands, not a bool.
  DRIFT_ASSIGN_OR_RETURN(Value left, evaluate(*logical.left, scope));
  if (truthy(left) == (logical.kind == ExprKind::kOr)) return left;
  return evaluate(*logical.right, scope);
}

Expected<Value> Interpreter::evaluate_concat(const ConcatExpr& concat, const Scope& scope) {
  std::string text;
  for (const ExprPtr& part : concat.parts) {
    DRIFT_ASSIGN_OR_RETURN(Value v, evaluate(*part, scope));
    append_py_str(text, v);
    DRIFT_RETURN_IF_ERROR(check_size(text.size()));
  }
  Value result = Value::string(std::move(text));
  DRIFT_RETURN_IF_ERROR(charge_for(result));
  return result;
}

Expected<Value> Interpreter::evaluate_conditional(const ConditionalExpr& conditional,
                                                  const Scope& scope) {
  DRIFT_ASSIGN_OR_RETURN(Value condition, evaluate(*conditional.condition, scope));
  if (truthy(condition)) return evaluate(*conditional.then_value, scope);
  if (conditional.else_value) return evaluate(*conditional.else_value, scope);
  return Value::undefined(fmt::format(
      "the inline if-expression on line {} evaluated to false and no else section was defined.",
      conditional.location.line));
}

// ---- calls ------------------------------------------------------------------------------------

Expected<Value> Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_function()) return callee.as_function().call(*this, args);
  if (callee.is_undefined()) return undefined_error(callee);
  return make_error("'{}' object is not callable", type_name(callee));
}

Expected<Value> Interpreter::call_macro(const MacroStmt& macro, const ScopePtr& parent,
                                        CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(charge(kMacroCallSteps));
  DepthGuard calls(call_depth_);
  if (call_depth_ > limits().max_call_depth) {
    return make_kind_error(ErrorKind::kLimit,
                           "macro calls nest more than {} deep (runaway recursion?)",
                           limits().max_call_depth);
  }
  const size_t n = macro.parameters.size();
  if (args.positional.size() > n && !macro.reads_varargs) {
    return make_error("macro '{}' takes not more than {} argument(s)", macro.name, n);
  }
  auto scope = std::make_shared<Scope>();
  scope->parent = parent;
  std::vector<bool> bound(n, false);
  for (size_t i = 0; i < n && i < args.positional.size(); ++i) {
    scope->set(macro.parameters[i], args.positional[i]);
    bound[i] = true;
  }
  Dict extra_keywords;
  for (auto& [name, value] : args.keywords) {
    size_t i = 0;
    while (i < n && macro.parameters[i] != name) ++i;
    if (i == n) {
      if (!macro.reads_kwargs) {
        return make_error("macro '{}' takes no keyword argument '{}'", macro.name, name);
      }
      extra_keywords.set(name, value);
      continue;
    }
    if (bound[i]) {
      return make_error("macro '{}' got multiple values for argument '{}'", macro.name, name);
    }
    scope->set(name, value);
    bound[i] = true;
  }
  const size_t first_default = n - macro.defaults.size();
  for (size_t i = 0; i < n; ++i) {
    if (bound[i]) continue;
    if (i >= first_default) {
      // Defaults are evaluated at call time, in the macro's scope (they may use earlier
      // parameters).
      DRIFT_ASSIGN_OR_RETURN(Value v, evaluate(*macro.defaults[i - first_default], *scope));
      scope->set(macro.parameters[i], std::move(v));
    } else {
      scope->set(macro.parameters[i], Value::undefined(fmt::format(
                                          "parameter '{}' was not provided", macro.parameters[i])));
    }
  }
  if (macro.reads_varargs) {
    std::vector<Value> extra;
    for (size_t i = n; i < args.positional.size(); ++i) extra.push_back(args.positional[i]);
    scope->set("varargs", Value::list(std::move(extra), ListKind::kTuple));
  }
  if (macro.reads_kwargs) scope->set("kwargs", Value::dict(std::move(extra_keywords)));
  std::string out;
  DRIFT_ASSIGN_OR_RETURN(Flow flow, execute(macro.body, scope, out));
  (void)flow;
  return Value::string(std::move(out));
}

Expected<Value> Interpreter::apply_filter(std::string_view name, const Value& input,
                                          CallArgs& args) {
  const FilterFunction filter = find_filter(name);
  if (!filter) return make_error("No filter named '{}'.", name);
  return filter(*this, input, args);
}

Expected<bool> Interpreter::apply_test(std::string_view name, const Value& input, CallArgs& args) {
  const TestFunction test = find_test(name);
  if (!test) return make_error("No test named '{}'.", name);
  return test(*this, input, args);
}

}  // namespace drift::jinja
