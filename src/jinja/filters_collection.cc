// jinja2's filters on values and collections: attr, default, dictsort, first/last, items, join,
// length, list, map, min/max, select/reject(attr), reverse, sort, sum, unique. Each follows the
// Python implementation on every value kind.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "jinja/filters_internal.h"
#include "jinja/interpreter.h"
#include "jinja/json.h"
#include "jinja/operators.h"
#include "jinja/pyformat.h"
#include "jinja/pyrepr.h"
#include "jinja/pystring.h"
#include "jinja/unicode.h"

namespace drift::jinja {
namespace {

const Value kEmpty = Value::string("");

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0 (environment.getitem, so
// keys before attributes); an integer attribute is an index.
Expected<Value> attribute_path(Interpreter& in, const Value& item, const Value& attribute) {
  if (attribute.is_none()) return item;
  if (!attribute.is_string()) return in.get_item(item, attribute);
  Value current = item;
  std::string_view path = attribute.as_string();
  while (true) {
    const size_t dot = path.find('.');
    const std::string_view part = path.substr(0, dot);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(),
                                                      [](char c) { return c >= '0' && c <= '9'; });
    if (numeric && part.size() < 18) {
      DRIFT_ASSIGN_OR_RETURN(current,
                             in.get_item(current, Value::integer(std::stoll(std::string(part)))));
    } else {
      DRIFT_ASSIGN_OR_RETURN(current, in.get_item(current, Value::string(std::string(part))));
    }
    if (dot == std::string_view::npos) return current;
    path.remove_prefix(dot + 1);
  }
}

// Sort keys compare strings case-insensitively unless asked otherwise.
Value ignore_case(const Value& v) { return v.is_string() ? text(lower(v.as_string())) : v; }

Expected<std::vector<Value>> items_of(Interpreter& in, const Value& v) {
  DRIFT_ASSIGN_OR_RETURN(std::shared_ptr<const List> list, in.iterate(v));
  return list->items;
}

// Stable sort by `keys` (Python's sorted with key=..., reverse=...). An uncomparable pair of
// keys is an error, as in Python.
Expected<std::vector<size_t>> sorted_order(const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::optional<Error> failure;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (failure) return false;
    auto r = reverse ? compare(keys[b], keys[a]) : compare(keys[a], keys[b]);
    if (!r.ok()) {
      failure = r.error();
      return false;
    }
    return *r < 0;
  });
  if (failure) return *failure;
  return order;
}

Expected<Value> min_or_max(Interpreter& in, const Value& v, CallArgs& args, bool want_max) {
  DRIFT_ASSIGN_OR_RETURN(auto a,
                         bind_arguments(want_max ? "max" : "min", args,
                                        {{"case_sensitive", kFalse}, {"attribute", kNone}}));
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items.size(); ++i) {
    DRIFT_ASSIGN_OR_RETURN(Value key, attribute_path(in, items[i], a[1]));
    if (!truthy(a[0])) key = ignore_case(key);
    if (i == 0) {
      best_key = key;
      continue;
    }
    DRIFT_ASSIGN_OR_RETURN(int order, compare(key, best_key));
    if (want_max ? order > 0 : order < 0) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}

// select / reject / selectattr / rejectattr.
Expected<Value> select_or_reject(Interpreter& in, const Value& v, CallArgs& args, bool select,
                                 bool by_attribute) {
  if (!truthy(v)) return in.make_list({}, ListKind::kGenerator);
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  size_t next = 0;
  Value attribute = kNone;
  if (by_attribute) {
    if (args.positional.empty()) return make_error("Missing parameter for attribute name");
    attribute = args.positional[next++];
  }
  std::optional<std::string> test;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) return make_error("test name must be a string");
    test = args.positional[next++].as_string();
  }
  std::vector<Value> kept;
  for (const Value& item : items) {
    DRIFT_ASSIGN_OR_RETURN(Value probe, attribute_path(in, item, attribute));
    bool passed;
    if (test) {
      CallArgs test_args;
      test_args.positional.assign(args.positional.begin() + static_cast<ptrdiff_t>(next),
                                  args.positional.end());
      test_args.keywords = args.keywords;
      DRIFT_ASSIGN_OR_RETURN(passed, in.apply_test(*test, probe, test_args));
    } else {
      passed = truthy(probe);
    }
    if (passed == select) kept.push_back(item);
  }
  return in.make_list(std::move(kept), ListKind::kGenerator);
}

// A hashable identity for unique(): equal values (1, 1.0, True) share one.
Expected<std::string> hash_key(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString:
      return "s" + v.as_string();
    case Value::Kind::kBool:
    case Value::Kind::kInt:
      return "n" + std::to_string(v.as_int());
    case Value::Kind::kFloat: {
      const double f = v.as_float();
      if (std::trunc(f) == f && std::fabs(f) < 9.2e18) {
        return "n" + std::to_string(static_cast<int64_t>(f));
      }
      return "f" + py_float_repr(f);
    }
    case Value::Kind::kNone:
      return std::string("none");
    case Value::Kind::kList:
      if (v.as_list().kind == ListKind::kTuple) {
        std::string key = "t(";
        for (const Value& item : v.as_list().items) {
          DRIFT_ASSIGN_OR_RETURN(std::string part, hash_key(item));
          key += std::to_string(part.size()) + ":" + part;
        }
        return key + ")";
      }
      break;
    case Value::Kind::kDict:
      break;
    default:
      return fmt::format("o{}", static_cast<int>(v.kind()));
  }
  return make_error("unhashable type: '{}'", type_name(v));
}

}  // namespace

Expected<Value> filter_attr(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments("attr", args, {{"name", std::nullopt}}));
  if (!a[0].is_string()) return Value::undefined("attribute name must be a string");
  // Python's getattr only: unlike `x.name`, a dict's keys are not attributes here.
  if (v.is_dict()) {
    if (auto method = find_method(v, a[0].as_string())) return *method;
    return Value::undefined(fmt::format("'dict object' has no attribute '{}'", a[0].as_string()));
  }
  return in.get_attribute(v, a[0].as_string());
}

Expected<Value> filter_default(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(
      auto a, bind_arguments("default", args, {{"default_value", kEmpty}, {"boolean", kFalse}}));
  if (v.is_undefined() || (truthy(a[1]) && !truthy(v))) return a[0];
  return v;
}

Expected<Value> filter_dictsort(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(
      auto a,
      bind_arguments("dictsort", args,
                     {{"case_sensitive", kFalse}, {"by", text("key")}, {"reverse", kFalse}}));
  if (!v.is_dict()) return make_error("dictsort needs a mapping, not {}", type_name(v));
  if (!a[1].is_string() || (a[1].as_string() != "key" && a[1].as_string() != "value")) {
    return make_error("You can only sort by either \"key\" or \"value\"");
  }
  const bool by_value = a[1].as_string() == "value";
  std::vector<Value> pairs;
  std::vector<Value> keys;
  for (const auto& [key, value] : v.as_dict().entries()) {
    pairs.push_back(Value::list({key, value}, ListKind::kTuple));
    const Value sort_key = by_value ? value : key;
    keys.push_back(truthy(a[0]) ? sort_key : ignore_case(sort_key));
  }
  DRIFT_ASSIGN_OR_RETURN(std::vector<size_t> order, sorted_order(keys, truthy(a[2])));
  std::vector<Value> sorted;
  for (size_t i : order) sorted.push_back(pairs[i]);
  return in.make_list(std::move(sorted));
}

Expected<Value> filter_first(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("first", args, {}));
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Expected<Value> filter_last(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("last", args, {}));
  if (v.is_list() && v.as_list().kind == ListKind::kGenerator) {
    return make_error("'generator' object is not reversible");
  }
  if (v.is_undefined()) return undefined_error(v);
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Expected<Value> filter_items(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("items", args, {}));
  if (v.is_undefined()) return in.make_list({}, ListKind::kGenerator);
  if (!v.is_dict()) return make_error("Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  for (const auto& [key, value] : v.as_dict().entries()) {
    pairs.push_back(Value::list({key, value}, ListKind::kTuple));
  }
  return in.make_list(std::move(pairs), ListKind::kGenerator);
}

Expected<Value> filter_join(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a,
                         bind_arguments("join", args, {{"d", kEmpty}, {"attribute", kNone}}));
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  const std::string separator = py_str(a[0]);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += separator;
    DRIFT_ASSIGN_OR_RETURN(Value item, attribute_path(in, items[i], a[1]));
    append_py_str(out, item);
    DRIFT_RETURN_IF_ERROR(in.check_size(out.size()));
  }
  return text(std::move(out));
}

Expected<Value> filter_length(Interpreter&, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("length", args, {}));
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return Value::integer(0);
    case Value::Kind::kString:
      return Value::integer(static_cast<int64_t>(utf8_length(v.as_string())));
    case Value::Kind::kList:
      if (v.as_list().kind == ListKind::kGenerator) break;
      return Value::integer(static_cast<int64_t>(v.as_list().items.size()));
    case Value::Kind::kDict:
      return Value::integer(static_cast<int64_t>(v.as_dict().size()));
    case Value::Kind::kLoop:
      return Value::integer(static_cast<int64_t>(v.as_loop().items->items.size()));
    default:
      break;
  }
  return make_error("object of type '{}' has no len()", type_name(v));
}

Expected<Value> filter_list(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("list", args, {}));
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  return in.make_list(std::move(items));
}

Expected<Value> filter_map(Interpreter& in, const Value& v, CallArgs& args) {
  std::vector<Value> out;
  if (!truthy(v)) return in.make_list({}, ListKind::kGenerator);
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  if (args.positional.empty()) {
    Value attribute, default_value = kNone;
    bool has_attribute = false;
    for (const auto& [name, value] : args.keywords) {
      if (name == "attribute") {
        attribute = value;
        has_attribute = true;
      } else if (name == "default") {
        default_value = value;
      } else {
        return make_error("Unexpected keyword argument '{}'", name);
      }
    }
    if (!has_attribute) return make_error("map requires a filter argument");
    for (const Value& item : items) {
      DRIFT_ASSIGN_OR_RETURN(Value mapped, attribute_path(in, item, attribute));
      if (mapped.is_undefined() && !default_value.is_none()) mapped = default_value;
      out.push_back(std::move(mapped));
    }
    return in.make_list(std::move(out), ListKind::kGenerator);
  }
  if (!args.positional[0].is_string()) return make_error("map: the filter name must be a string");
  const std::string name = args.positional[0].as_string();
  for (const Value& item : items) {
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keywords = args.keywords;
    DRIFT_ASSIGN_OR_RETURN(Value mapped, in.apply_filter(name, item, rest));
    out.push_back(std::move(mapped));
  }
  return in.make_list(std::move(out), ListKind::kGenerator);
}

Expected<Value> filter_max(Interpreter& in, const Value& v, CallArgs& args) {
  return min_or_max(in, v, args, true);
}

Expected<Value> filter_min(Interpreter& in, const Value& v, CallArgs& args) {
  return min_or_max(in, v, args, false);
}

Expected<Value> filter_select(Interpreter& in, const Value& v, CallArgs& args) {
  return select_or_reject(in, v, args, true, false);
}

Expected<Value> filter_reject(Interpreter& in, const Value& v, CallArgs& args) {
  return select_or_reject(in, v, args, false, false);
}

Expected<Value> filter_selectattr(Interpreter& in, const Value& v, CallArgs& args) {
  return select_or_reject(in, v, args, true, true);
}

Expected<Value> filter_rejectattr(Interpreter& in, const Value& v, CallArgs& args) {
  return select_or_reject(in, v, args, false, true);
}

Expected<Value> filter_reverse(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("reverse", args, {}));
  if (v.is_string()) {
    std::u32string points = decode_utf8(v.as_string(), Utf8Policy::kStrict);
    std::reverse(points.begin(), points.end());
    return text(encode_utf8(points, Utf8Policy::kStrict));
  }
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  std::reverse(items.begin(), items.end());
  // reversed() gives an iterator, not a list.
  return in.make_list(std::move(items), ListKind::kGenerator);
}

Expected<Value> filter_sort(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(
      auto a,
      bind_arguments("sort", args,
                     {{"reverse", kFalse}, {"case_sensitive", kFalse}, {"attribute", kNone}}));
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  // attribute may list several, comma-separated: the key is then a tuple.
  std::vector<Value> attributes;
  if (a[2].is_string()) {
    for (const std::string& part : py_split(a[2].as_string(), std::string(","), -1, false)) {
      attributes.push_back(text(part));
    }
  } else {
    attributes.push_back(a[2]);
  }
  std::vector<Value> keys;
  for (const Value& item : items) {
    std::vector<Value> parts;
    for (const Value& attribute : attributes) {
      DRIFT_ASSIGN_OR_RETURN(Value key, attribute_path(in, item, attribute));
      parts.push_back(truthy(a[1]) ? key : ignore_case(key));
    }
    keys.push_back(parts.size() == 1 ? parts[0] : Value::list(std::move(parts), ListKind::kTuple));
  }
  DRIFT_RETURN_IF_ERROR(in.charge(items.size() * 8));  // n log n comparisons, roughly
  DRIFT_ASSIGN_OR_RETURN(std::vector<size_t> order, sorted_order(keys, truthy(a[0])));
  std::vector<Value> sorted;
  for (size_t i : order) sorted.push_back(items[i]);
  return in.make_list(std::move(sorted));
}

Expected<Value> filter_sum(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(
      auto a, bind_arguments("sum", args, {{"attribute", kNone}, {"start", Value::integer(0)}}));
  if (a[1].is_string()) return make_error("sum() can't sum strings [use ''.join(seq) instead]");
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  Value total = a[1];
  for (const Value& item : items) {
    DRIFT_ASSIGN_OR_RETURN(Value term, attribute_path(in, item, a[0]));
    DRIFT_ASSIGN_OR_RETURN(total, binary_operation(BinaryOp::kAdd, total, term, in.limits()));
  }
  return total;
}

Expected<Value> filter_unique(Interpreter& in, const Value& v, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(
      auto a, bind_arguments("unique", args, {{"case_sensitive", kFalse}, {"attribute", kNone}}));
  DRIFT_ASSIGN_OR_RETURN(std::vector<Value> items, items_of(in, v));
  std::unordered_set<std::string> seen;
  std::vector<Value> kept;
  for (const Value& item : items) {
    DRIFT_ASSIGN_OR_RETURN(Value key, attribute_path(in, item, a[1]));
    if (!truthy(a[0])) key = ignore_case(key);
    DRIFT_ASSIGN_OR_RETURN(std::string hashed, hash_key(key));
    if (seen.insert(std::move(hashed)).second) kept.push_back(item);
  }
  return in.make_list(std::move(kept), ListKind::kGenerator);
}

}  // namespace drift::jinja
