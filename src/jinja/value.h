// The values a Jinja template computes with, modelled on the Python objects jinja2 works with:
// undefined, None, bool, int, float, str, list/tuple, dict, plus the interpreter's own namespace,
// loop and callable objects. Values are cheap to copy: strings and containers are shared and,
// except for namespaces (which `{% set ns.x = ... %}` mutates), never change after creation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/error.h"

namespace drift::jinja {

class Value;
class Interpreter;

// Positional and keyword arguments of a call, a filter or a test, after evaluation.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};

// A function a template can call: a builtin, a bound method or a macro.
using NativeFunction = std::function<Expected<Value>(Interpreter&, CallArgs&)>;

struct Function {
  std::string name;
  NativeFunction call;
};

// Python distinguishes lists from tuples (printing, equality) and from generators (what jinja2's
// map/select/items return: always truthy, no len()); they share one representation here.
enum class ListKind : uint8_t { kList, kTuple, kGenerator };

struct List {
  ListKind kind = ListKind::kList;
  uint32_t depth = 1;  // containers nested inside, counting this one: bounds every recursion
  std::vector<Value> items;
};

// An insertion-ordered map like a Python dict: keys are str (all of them in JSON input), int,
// float, bool or None, with Python's key equality (1, 1.0 and True are one key).
class Dict {
 public:
  const Value* find(std::string_view key) const;
  const Value* find(const Value& key) const;
  // Inserts or replaces, keeping the first insertion's position (as Python does). The key must
  // be hashable (see is_hashable_key).
  void set(std::string key, Value value);
  void set(Value key, Value value);
  void clear();
  // Defined after Value: clang instantiates std::pair<Value, Value> for an inline body here,
  // while Value is still incomplete.
  size_t size() const;
  bool empty() const;
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  uint32_t depth() const { return depth_; }

 private:
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view key) const { return std::hash<std::string_view>{}(key); }
  };
  using Index = std::unordered_map<std::string, size_t, KeyHash, std::equal_to<>>;
  // Dicts from messages are small and searched linearly; past this size indexes are kept so a
  // hostile input with many keys cannot make look-ups quadratic.
  static constexpr size_t kIndexThreshold = 16;
  static constexpr size_t kNotFound = static_cast<size_t>(-1);
  size_t find_index(std::string_view key) const;
  size_t find_index(const Value& key) const;
  void index_entry(size_t i);

  std::vector<std::pair<Value, Value>> entries_;
  bool indexed_ = false;
  Index string_index_;  // str keys
  Index other_index_;   // other keys, by their canonical text (see dict_key_text)
  uint32_t depth_ = 1;
};

// State of a `for` loop, read through the `loop` variable.
struct LoopInfo {
  int64_t index0 = 0;
  int64_t depth0 = 0;
  std::shared_ptr<const List> items;  // the (filtered) sequence being iterated
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kLoop,
    kFunction,
  };

  Value() = default;  // undefined, with no hint
  // An undefined value; `hint` is the message an operation on it fails with, e.g.
  // "'dict object' has no attribute 'tool_calls'".
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s);
  // jinja2's Markup: a string marked safe (by `safe` or `escape`). It prints as itself, but `+`
  // and `%` HTML-escape the plain strings they combine it with, as markupsafe does.
  static Value markup(std::string s);
  static Value list(std::vector<Value> items, ListKind kind = ListKind::kList);
  static Value dict(Dict d);
  static Value new_namespace(Dict attributes);
  // The loop object of a for loop, which advances it in place (as jinja2's LoopContext).
  static Value loop(std::shared_ptr<LoopInfo> info);
  static Value function(std::string name, NativeFunction call);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // Python's numbers: bool is an int subclass.
  bool is_number() const { return kind_ == Kind::kBool || kind_ == Kind::kInt || is_float(); }
  bool is_integral() const { return kind_ == Kind::kBool || kind_ == Kind::kInt; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return kind_ == Kind::kString && scalar_.b; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_loop() const { return kind_ == Kind::kLoop; }
  bool is_function() const { return kind_ == Kind::kFunction; }

  bool as_bool() const { return scalar_.b; }
  // The integer value of a bool or int.
  int64_t as_int() const { return kind_ == Kind::kBool ? (scalar_.b ? 1 : 0) : scalar_.i; }
  // Any number as a double.
  double as_float() const;
  const std::string& as_string() const { return *static_cast<const std::string*>(object_.get()); }
  const List& as_list() const { return *static_cast<const List*>(object_.get()); }
  std::shared_ptr<const List> list_ptr() const {
    return std::static_pointer_cast<const List>(object_);
  }
  // The entries of a dict or a namespace.
  const Dict& as_dict() const { return *static_cast<const Dict*>(object_.get()); }
  Dict& namespace_attributes() const { return *static_cast<Dict*>(object_.get()); }
  std::shared_ptr<Dict> namespace_ptr() const { return std::static_pointer_cast<Dict>(object_); }
  const LoopInfo& as_loop() const { return *static_cast<const LoopInfo*>(object_.get()); }
  const Function& as_function() const { return *static_cast<const Function*>(object_.get()); }
  // The failure message of an undefined value (empty when it has none).
  const std::string& undefined_hint() const;

  // Container nesting depth: 0 for scalars.
  uint32_t depth() const;
  // True if both refer to the same object (Python's `is` for objects with identity).
  bool same_object(const Value& other) const { return object_ == other.object_; }

 private:
  Kind kind_ = Kind::kUndefined;
  union {
    bool b;
    int64_t i;
    double f;
  } scalar_{};
  std::shared_ptr<void> object_;
};

inline size_t Dict::size() const { return entries_.size(); }
inline bool Dict::empty() const { return entries_.empty(); }

// Python's truth value.
bool truthy(const Value& v);
// Python's `==` (1 == 1.0 == True; dicts compare without regard to order; lists never equal
// tuples). Undefined equals undefined, as jinja2's Undefined.__eq__ says.
bool equals(const Value& a, const Value& b);
// Python's ordering for `<`, sort and min/max: numbers with numbers, strings with strings,
// sequences lexicographically. Returns <0, 0 or >0, or an error naming the two types.
Expected<int> compare(const Value& a, const Value& b);
// The Python type name used in error messages: 'str', 'int', 'dict', 'NoneType', ...
std::string_view type_name(const Value& v);
// Whether a value can be a dict key here: str, int, float, bool or None.
bool is_hashable_key(const Value& v);

}  // namespace drift::jinja
