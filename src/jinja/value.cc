#include "jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace drift::jinja {

namespace {

// A non-str key as text that equal keys share: 1, 1.0 and True are "n1".
std::string dict_key_text(const Value& key) {
  if (key.is_integral()) return "n" + std::to_string(key.as_int());
  if (key.is_float()) {
    const double f = key.as_float();
    if (std::trunc(f) == f && std::fabs(f) < 9.2e18) {
      return "n" + std::to_string(static_cast<int64_t>(f));
    }
    char buf[32];
    const int n = std::snprintf(buf, sizeof(buf), "f%.17g", f);
    return std::string(buf, static_cast<size_t>(n));
  }
  return "z";  // None
}

}  // namespace

size_t Dict::find_index(std::string_view key) const {
  if (indexed_) {
    auto it = string_index_.find(key);
    return it == string_index_.end() ? kNotFound : it->second;
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Value& k = entries_[i].first;
    if (k.is_string() && k.as_string() == key) return i;
  }
  return kNotFound;
}

size_t Dict::find_index(const Value& key) const {
  if (key.is_string()) return find_index(std::string_view(key.as_string()));
  if (!is_hashable_key(key)) return kNotFound;
  if (indexed_) {
    auto it = other_index_.find(dict_key_text(key));
    return it == other_index_.end() ? kNotFound : it->second;
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Value& k = entries_[i].first;
    if (!k.is_string() && equals(k, key)) return i;
  }
  return kNotFound;
}

const Value* Dict::find(std::string_view key) const {
  const size_t i = find_index(key);
  return i == kNotFound ? nullptr : &entries_[i].second;
}

const Value* Dict::find(const Value& key) const {
  const size_t i = find_index(key);
  return i == kNotFound ? nullptr : &entries_[i].second;
}

void Dict::set(std::string key, Value value) {
  set(Value::string(std::move(key)), std::move(value));
}

void Dict::set(Value key, Value value) {
  depth_ = std::max(depth_, value.depth() + 1);
  if (const size_t i = find_index(key); i != kNotFound) {
    entries_[i].second = std::move(value);
    return;
  }
  entries_.emplace_back(std::move(key), std::move(value));
  if (indexed_) {
    index_entry(entries_.size() - 1);
  } else if (entries_.size() > kIndexThreshold) {
    indexed_ = true;
    for (size_t i = 0; i < entries_.size(); ++i) index_entry(i);
  }
}

void Dict::index_entry(size_t i) {
  const Value& key = entries_[i].first;
  if (key.is_string()) {
    string_index_.emplace(key.as_string(), i);
  } else {
    other_index_.emplace(dict_key_text(key), i);
  }
}

void Dict::clear() {
  entries_.clear();
  string_index_.clear();
  other_index_.clear();
  indexed_ = false;
  depth_ = 1;
}

bool is_hashable_key(const Value& v) { return v.is_string() || v.is_number() || v.is_none(); }

Value Value::undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.object_ = std::make_shared<std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.scalar_.b = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.scalar_.i = i;
  return v;
}

Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.scalar_.f = f;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.object_ = std::make_shared<std::string>(std::move(s));
  return v;
}

Value Value::markup(std::string s) {
  Value v = string(std::move(s));
  v.scalar_.b = true;
  return v;
}

Value Value::list(std::vector<Value> items, ListKind kind) {
  auto list = std::make_shared<List>();
  list->kind = kind;
  uint32_t inner = 0;
  for (const Value& item : items) inner = std::max(inner, item.depth());
  list->depth = inner + 1;
  list->items = std::move(items);
  Value v;
  v.kind_ = Kind::kList;
  v.object_ = std::move(list);
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  v.kind_ = Kind::kDict;
  v.object_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::new_namespace(Dict attributes) {
  Value v = dict(std::move(attributes));
  v.kind_ = Kind::kNamespace;
  return v;
}

Value Value::loop(std::shared_ptr<LoopInfo> info) {
  Value v;
  v.kind_ = Kind::kLoop;
  v.object_ = std::move(info);
  return v;
}

Value Value::function(std::string name, NativeFunction call) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.object_ = std::make_shared<Function>(Function{std::move(name), std::move(call)});
  return v;
}

double Value::as_float() const {
  switch (kind_) {
    case Kind::kBool:
      return scalar_.b ? 1.0 : 0.0;
    case Kind::kInt:
      return static_cast<double>(scalar_.i);
    default:
      return scalar_.f;
  }
}

const std::string& Value::undefined_hint() const {
  static const std::string kEmpty;
  return object_ ? *static_cast<const std::string*>(object_.get()) : kEmpty;
}

uint32_t Value::depth() const {
  switch (kind_) {
    case Kind::kList:
      return as_list().depth;
    case Kind::kDict:
      return as_dict().depth();
    case Kind::kNamespace:  // mutable, so never recursed into: counts as one level
      return 1;
    default:
      return 0;
  }
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int() != 0;
    case Value::Kind::kFloat:
      return v.as_float() != 0.0;
    case Value::Kind::kString:
      return !v.as_string().empty();
    case Value::Kind::kList:
      return v.as_list().kind == ListKind::kGenerator || !v.as_list().items.empty();
    case Value::Kind::kDict:
      return !v.as_dict().empty();
    default:
      return true;
  }
}

namespace {

// Exact comparison of an integer with a double, as Python does (no rounding of the integer).
int compare_int_float(int64_t i, double f) {
  if (std::isnan(f)) return 2;  // unordered
  if (f >= 9223372036854775808.0) return -1;
  if (f < -9223372036854775808.0) return 1;
  const double truncated = std::trunc(f);
  const auto as_int = static_cast<int64_t>(truncated);
  if (i != as_int) return i < as_int ? -1 : 1;
  if (f == truncated) return 0;
  return f > truncated ? -1 : 1;
}

// <0, 0, >0, or 2 when unordered (NaN).
int compare_numbers(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_integral()) return compare_int_float(a.as_int(), b.as_float());
  if (b.is_integral()) {
    const int r = compare_int_float(b.as_int(), a.as_float());
    return r == 2 ? 2 : -r;
  }
  const double x = a.as_float(), y = b.as_float();
  if (std::isnan(x) || std::isnan(y)) return 2;
  return x < y ? -1 : (x > y ? 1 : 0);
}

}  // namespace

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return compare_numbers(a, b) == 0;
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.kind == ListKind::kGenerator || y.kind == ListKind::kGenerator) {
        return a.same_object(b);
      }
      if (x.kind != y.kind || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!equals(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, value] : x.entries()) {
        const Value* other = y.find(key);
        if (!other || !equals(value, *other)) return false;
      }
      return true;
    }
    default:
      return a.same_object(b);
  }
}

Expected<int> compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    const int r = compare_numbers(a, b);
    return r == 2 ? 1 : r;  // NaN: any answer is as good as Python's
  }
  if (a.is_string() && b.is_string()) {
    const int r = a.as_string().compare(b.as_string());  // UTF-8 byte order is code point order
    return r < 0 ? -1 : (r > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.as_list().kind == b.as_list().kind &&
      a.as_list().kind != ListKind::kGenerator) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  return make_error("'<' not supported between instances of '{}' and '{}'", type_name(a),
                    type_name(b));
}

std::string_view type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kList:
      switch (v.as_list().kind) {
        case ListKind::kTuple:
          return "tuple";
        case ListKind::kGenerator:
          return "generator";
        default:
          return "list";
      }
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kNamespace:
      return "Namespace";
    case Value::Kind::kLoop:
      return "LoopContext";
    case Value::Kind::kFunction:
      return "function";
  }
  return "object";
}

}  // namespace drift::jinja
