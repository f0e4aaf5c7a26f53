// Python's object access as jinja2's sandbox performs it: `x.name` (getattr, then the key of
// that name), `x[key]` (the item, then the attribute of that name), slicing, and iteration. A
// missing attribute, key or index is an undefined value that remembers why; only using an
// undefined value fails.
#include <fmt/format.h>

#include <optional>

#include "jinja/builtins.h"
#include "jinja/interpreter.h"
#include "jinja/operators.h"
#include "jinja/pyrepr.h"
#include "jinja/unicode.h"

namespace drift::jinja {
namespace {

// Python's slice.indices(): clamps start/stop for `length` items and `step`.
struct SliceBounds {
  int64_t start, stop, step;
};

Expected<SliceBounds> slice_bounds(const Value& start, const Value& stop, const Value& step,
                                   int64_t length) {
  auto as_index = [](const Value& v, const char* what) -> Expected<std::optional<int64_t>> {
    if (v.is_none() || v.is_undefined()) return std::optional<int64_t>();
    if (!v.is_integral()) {
      return make_error("slice {} must be an integer or None, not {}", what, type_name(v));
    }
    return std::optional<int64_t>(v.as_int());
  };
  DRIFT_ASSIGN_OR_RETURN(std::optional<int64_t> step_value, as_index(step, "step"));
  const int64_t s = step_value.value_or(1);
  if (s == 0) return make_error("slice step cannot be zero");
  if (s == INT64_MIN) return make_error("slice step is out of range");
  DRIFT_ASSIGN_OR_RETURN(std::optional<int64_t> start_value, as_index(start, "indices"));
  DRIFT_ASSIGN_OR_RETURN(std::optional<int64_t> stop_value, as_index(stop, "indices"));
  auto clamp = [&](std::optional<int64_t> index, bool is_start) -> int64_t {
    const int64_t lower = s < 0 ? -1 : 0;
    const int64_t upper = s < 0 ? length - 1 : length;
    if (!index) return is_start ? (s < 0 ? upper : lower) : (s < 0 ? lower : upper);
    int64_t i = *index;
    if (i < 0) {
      i = i < -length ? lower : i + length;  // avoids overflow for huge negative indexes
      return std::max(i, lower);
    }
    return std::min(i, upper);
  };
  return SliceBounds{clamp(start_value, true), clamp(stop_value, false), s};
}

template <typename Emit>
void for_each_slice_index(const SliceBounds& b, Emit emit) {
  // Stepping stops before the index would overflow (a step of 2**63-1 is legal in Python).
  for (int64_t i = b.start; b.step > 0 ? i < b.stop : i > b.stop;) {
    emit(i);
    if (__builtin_add_overflow(i, b.step, &i)) break;
  }
}

Value unsafe_attribute(const Value& object, std::string_view name) {
  return Value::undefined(
      fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, type_name(object)));
}

Value missing_attribute(const Value& object, std::string_view name) {
  return Value::undefined(
      fmt::format("'{}' has no attribute '{}'", object_description(object), name));
}

// Indexing and slicing Markup gives Markup.
Value string_like(const Value& model, std::string text) {
  return model.is_markup() ? Value::markup(std::move(text)) : Value::string(std::move(text));
}

// jinja2 quotes the object's description for a missing attribute but not for a missing element.
Value missing_element(const Value& object, const Value& key) {
  return Value::undefined(
      fmt::format("{} has no element {}", object_description(object), py_repr(key)));
}

Value loop_attribute(const LoopInfo& loop, std::string_view name) {
  const auto length = static_cast<int64_t>(loop.items->items.size());
  const int64_t i = loop.index0;
  if (name == "index") return Value::integer(i + 1);
  if (name == "index0") return Value::integer(i);
  if (name == "revindex") return Value::integer(length - i);
  if (name == "revindex0") return Value::integer(length - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i == length - 1);
  if (name == "length") return Value::integer(length);
  if (name == "depth") return Value::integer(loop.depth0 + 1);
  if (name == "depth0") return Value::integer(loop.depth0);
  if (name == "previtem") {
    if (i > 0) return loop.items->items[static_cast<size_t>(i - 1)];
    return Value::undefined("there is no previous item");
  }
  if (name == "nextitem") {
    if (i + 1 < length) return loop.items->items[static_cast<size_t>(i + 1)];
    return Value::undefined("there is no next item");
  }
  if (name == "cycle") {
    return Value::function("cycle", [i](Interpreter&, CallArgs& args) -> Expected<Value> {
      if (args.positional.empty()) return make_error("no items for cycling given");
      return args.positional[static_cast<size_t>(i) % args.positional.size()];
    });
  }
  return Value::undefined(fmt::format("'LoopContext object' has no attribute '{}'", name));
}

}  // namespace

Expected<Value> Interpreter::get_attribute(const Value& object, std::string_view name) {
  if (object.is_undefined()) return undefined_error(object);
  const bool private_name = !name.empty() && name.front() == '_';
  switch (object.kind()) {
    case Value::Kind::kDict: {
      // Python attribute first (the dict's methods), then the key.
      if (!private_name) {
        if (auto method = find_method(object, name)) return *method;
      }
      if (const Value* v = object.as_dict().find(name)) return *v;
      return private_name && name.size() > 1 && name[1] == '_' ? unsafe_attribute(object, name)
                                                               : missing_attribute(object, name);
    }
    case Value::Kind::kNamespace:
      if (const Value* v = object.namespace_attributes().find(name)) return *v;
      return Value::undefined(fmt::format("'Namespace object' has no attribute '{}'", name));
    case Value::Kind::kLoop:
      if (private_name) return unsafe_attribute(object, name);
      return loop_attribute(object.as_loop(), name);
    default:
      if (private_name) return unsafe_attribute(object, name);
      if (auto method = find_method(object, name)) return *method;
      return missing_attribute(object, name);
  }
}

Expected<Value> Interpreter::get_item(const Value& object, const Value& key) {
  if (object.is_undefined()) return undefined_error(object);
  switch (object.kind()) {
    case Value::Kind::kList: {
      const List& list = object.as_list();
      if (list.kind == ListKind::kGenerator || !key.is_integral()) break;
      int64_t i = key.as_int();
      const auto n = static_cast<int64_t>(list.items.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) {
        return missing_element(object, key);
      }
      return list.items[static_cast<size_t>(i)];
    }
    case Value::Kind::kString: {
      if (!key.is_integral()) break;
      const std::string& s = object.as_string();
      int64_t i = key.as_int();
      if (is_ascii(s)) {
        const auto n = static_cast<int64_t>(s.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return string_like(object, std::string(1, s[static_cast<size_t>(i)]));
      } else {
        const std::u32string points = decode_utf8(s, Utf8Policy::kStrict);
        const auto n = static_cast<int64_t>(points.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n)
          return string_like(
              object, encode_utf8(points.substr(static_cast<size_t>(i), 1), Utf8Policy::kStrict));
      }
      return missing_element(object, key);
    }
    case Value::Kind::kDict:
      if (const Value* v = object.as_dict().find(key)) return *v;
      break;
    default:
      break;
  }
  // jinja2's getitem falls back to the attribute of that name.
  if (key.is_string()) {
    if (object.is_dict() && !key.as_string().empty() && key.as_string().front() == '_') {
      return missing_attribute(object, key.as_string());
    }
    return get_attribute(object, key.as_string());
  }
  return missing_element(object, key);
}

Expected<Value> Interpreter::slice(const Value& object, const Value& start, const Value& stop,
                                   const Value& step) {
  if (object.is_undefined()) return undefined_error(object);
  if (object.is_list() && object.as_list().kind != ListKind::kGenerator) {
    const List& list = object.as_list();
    DRIFT_ASSIGN_OR_RETURN(
        SliceBounds b, slice_bounds(start, stop, step, static_cast<int64_t>(list.items.size())));
    std::vector<Value> items;
    for_each_slice_index(b,
                         [&](int64_t i) { items.push_back(list.items[static_cast<size_t>(i)]); });
    return make_list(std::move(items), list.kind);
  }
  if (object.is_string()) {
    const std::string& s = object.as_string();
    std::string out;
    if (is_ascii(s)) {
      DRIFT_ASSIGN_OR_RETURN(SliceBounds b,
                             slice_bounds(start, stop, step, static_cast<int64_t>(s.size())));
      for_each_slice_index(b, [&](int64_t i) { out.push_back(s[static_cast<size_t>(i)]); });
    } else {
      const std::u32string points = decode_utf8(s, Utf8Policy::kStrict);
      DRIFT_ASSIGN_OR_RETURN(SliceBounds b,
                             slice_bounds(start, stop, step, static_cast<int64_t>(points.size())));
      for_each_slice_index(b, [&](int64_t i) {
        append_utf8(points[static_cast<size_t>(i)], out, Utf8Policy::kStrict);
      });
    }
    return string_like(object, std::move(out));
  }
  // Not subscriptable with a slice: jinja2 gives undefined.
  return Value::undefined(fmt::format("{} has no element slice", object_description(object)));
}

Expected<std::shared_ptr<const List>> Interpreter::iterate(const Value& iterable) {
  switch (iterable.kind()) {
    case Value::Kind::kUndefined:
      return std::make_shared<const List>();
    case Value::Kind::kList:
      return iterable.list_ptr();
    case Value::Kind::kDict: {
      auto keys = std::make_shared<List>();
      for (const auto& [key, value] : iterable.as_dict().entries()) keys->items.push_back(key);
      return std::shared_ptr<const List>(std::move(keys));
    }
    case Value::Kind::kString: {
      auto chars = std::make_shared<List>();
      const std::string& s = iterable.as_string();
      if (is_ascii(s)) {
        for (char c : s) chars->items.push_back(Value::string(std::string(1, c)));
      } else {
        for (char32_t c : decode_utf8(s, Utf8Policy::kStrict)) {
          std::string one;
          append_utf8(c, one, Utf8Policy::kStrict);
          chars->items.push_back(Value::string(std::move(one)));
        }
      }
      DRIFT_RETURN_IF_ERROR(charge(chars->items.size()));
      return std::shared_ptr<const List>(std::move(chars));
    }
    default:
      return make_error("'{}' object is not iterable", type_name(iterable));
  }
}

}  // namespace drift::jinja
