// Methods of Python's str, dict and list that templates call (`content.strip()`,
// `message.get('tool_calls')`, `text.split('</think>')`). jinja2's ImmutableSandboxedEnvironment
// refuses the ones that modify a list or dict (append, pop, update, ...): looking them up gives an
// undefined value whose use fails with the sandbox's message.
#include <fmt/format.h>

#include <algorithm>

#include "jinja/builtins.h"
#include "jinja/error_kind.h"
#include "jinja/interpreter.h"
#include "jinja/pyformat.h"
#include "jinja/pyrepr.h"
#include "jinja/pystring.h"
#include "jinja/unicode.h"

namespace drift::jinja {
namespace {

const Value kNone = Value::none();

using Method = Expected<Value> (*)(Interpreter&, const Value& self, CallArgs& args);

struct NamedMethod {
  std::string_view name;
  Method method;
};

Value text(std::string s) { return Value::string(std::move(s)); }

// Markup's methods return Markup (replace() escapes the plain replacement text).
Value like(const Value& self, std::string s) {
  return self.is_markup() ? Value::markup(std::move(s)) : Value::string(std::move(s));
}
std::string escaped_for(const Value& self, const std::string& argument) {
  return self.is_markup() ? html_escape(argument) : argument;
}

Expected<std::string> string_argument(std::string_view method, const Value& v) {
  if (!v.is_string()) {
    return make_error("{}() argument must be str, not {}", method, type_name(v));
  }
  return v.as_string();
}

// ---- str ----

Expected<Value> str_strip_common(const Value& self, CallArgs& args, std::string_view name,
                                 bool left, bool right) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments(name, args, {{"chars", kNone}}));
  if (a[0].is_none()) return like(self, strip(self.as_string(), left, right, nullptr));
  DRIFT_ASSIGN_OR_RETURN(std::string chars, string_argument(name, a[0]));
  const std::u32string points = decode_utf8(chars, Utf8Policy::kStrict);
  return like(self, strip(self.as_string(), left, right, &points));
}
Expected<Value> str_strip(Interpreter&, const Value& self, CallArgs& args) {
  return str_strip_common(self, args, "strip", true, true);
}
Expected<Value> str_lstrip(Interpreter&, const Value& self, CallArgs& args) {
  return str_strip_common(self, args, "lstrip", true, false);
}
Expected<Value> str_rstrip(Interpreter&, const Value& self, CallArgs& args) {
  return str_strip_common(self, args, "rstrip", false, true);
}

Expected<Value> str_split_common(Interpreter& in, const Value& self, CallArgs& args,
                                 std::string_view name, bool from_right) {
  DRIFT_ASSIGN_OR_RETURN(
      auto a, bind_arguments(name, args, {{"sep", kNone}, {"maxsplit", Value::integer(-1)}}));
  std::optional<std::string> sep;
  if (!a[0].is_none()) {
    DRIFT_ASSIGN_OR_RETURN(sep, string_argument(name, a[0]));
    if (sep->empty()) return make_error("empty separator");
  }
  if (!a[1].is_integral()) {
    return make_error("'{}' object cannot be interpreted as an integer", type_name(a[1]));
  }
  std::vector<Value> parts;
  for (std::string& part : py_split(self.as_string(), sep, a[1].as_int(), from_right)) {
    parts.push_back(like(self, std::move(part)));
  }
  return in.make_list(std::move(parts));
}
Expected<Value> str_split(Interpreter& in, const Value& self, CallArgs& args) {
  return str_split_common(in, self, args, "split", false);
}
Expected<Value> str_rsplit(Interpreter& in, const Value& self, CallArgs& args) {
  return str_split_common(in, self, args, "rsplit", true);
}

Expected<Value> str_splitlines(Interpreter& in, const Value& self, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a,
                         bind_arguments("splitlines", args, {{"keepends", Value::boolean(false)}}));
  std::vector<Value> lines;
  for (std::string& line : py_splitlines(self.as_string(), truthy(a[0]))) {
    lines.push_back(text(std::move(line)));
  }
  return in.make_list(std::move(lines));
}

// startswith/endswith(prefix or tuple of prefixes[, start[, end]]); start/end are not supported.
Expected<Value> str_affix(const Value& self, CallArgs& args, std::string_view name, bool suffix) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments(name, args, {{"prefix", std::nullopt}}));
  std::vector<std::string> candidates;
  if (a[0].is_string()) {
    candidates.push_back(a[0].as_string());
  } else if (a[0].is_list() && a[0].as_list().kind == ListKind::kTuple) {
    for (const Value& item : a[0].as_list().items) {
      DRIFT_ASSIGN_OR_RETURN(std::string candidate, string_argument(name, item));
      candidates.push_back(std::move(candidate));
    }
  } else {
    return make_error("{} first arg must be str or a tuple of str, not {}", name, type_name(a[0]));
  }
  const std::string& s = self.as_string();
  for (const std::string& c : candidates) {
    const bool match =
        suffix ? (s.size() >= c.size() && s.compare(s.size() - c.size(), c.size(), c) == 0)
               : s.compare(0, c.size(), c) == 0;
    if (match) return Value::boolean(true);
  }
  return Value::boolean(false);
}
Expected<Value> str_startswith(Interpreter&, const Value& self, CallArgs& args) {
  return str_affix(self, args, "startswith", false);
}
Expected<Value> str_endswith(Interpreter&, const Value& self, CallArgs& args) {
  return str_affix(self, args, "endswith", true);
}

Expected<Value> str_replace(Interpreter& in, const Value& self, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(
      auto a, bind_arguments(
                  "replace", args,
                  {{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value::integer(-1)}}));
  DRIFT_ASSIGN_OR_RETURN(std::string old_text, string_argument("replace", a[0]));
  DRIFT_ASSIGN_OR_RETURN(std::string new_text, string_argument("replace", a[1]));
  if (!a[2].is_integral()) {
    return make_error("'{}' object cannot be interpreted as an integer", type_name(a[2]));
  }
  auto out = py_replace(self.as_string(), old_text,
                        a[1].is_markup() ? new_text : escaped_for(self, new_text), a[2].as_int(),
                        in.limits().max_output_bytes);
  if (!out)
    return make_kind_error(ErrorKind::kLimit,
                           "replace() would build a string over the output limit");
  return like(self, std::move(*out));
}

Expected<Value> str_no_argument(const Value& self, CallArgs& args, std::string_view name,
                                std::string (*transform)(std::string_view)) {
  DRIFT_RETURN_IF_ERROR(bind_arguments(name, args, {}));
  return like(self, transform(self.as_string()));
}
Expected<Value> str_upper(Interpreter&, const Value& self, CallArgs& args) {
  return str_no_argument(self, args, "upper", upper);
}
Expected<Value> str_lower(Interpreter&, const Value& self, CallArgs& args) {
  return str_no_argument(self, args, "lower", lower);
}
Expected<Value> str_title(Interpreter&, const Value& self, CallArgs& args) {
  return str_no_argument(self, args, "title", py_title);
}
Expected<Value> str_capitalize(Interpreter&, const Value& self, CallArgs& args) {
  return str_no_argument(self, args, "capitalize", py_capitalize);
}

Expected<Value> str_predicate(const Value& self, CallArgs& args, std::string_view name,
                              bool (*predicate)(std::string_view)) {
  DRIFT_RETURN_IF_ERROR(bind_arguments(name, args, {}));
  return Value::boolean(predicate(self.as_string()));
}
Expected<Value> str_isdigit(Interpreter&, const Value& self, CallArgs& args) {
  return str_predicate(self, args, "isdigit", py_isdigit_text);
}
Expected<Value> str_isalpha(Interpreter&, const Value& self, CallArgs& args) {
  return str_predicate(self, args, "isalpha", py_isalpha_text);
}
Expected<Value> str_isalnum(Interpreter&, const Value& self, CallArgs& args) {
  return str_predicate(self, args, "isalnum", py_isalnum_text);
}
Expected<Value> str_isspace(Interpreter&, const Value& self, CallArgs& args) {
  return str_predicate(self, args, "isspace", py_isspace_text);
}
Expected<Value> str_islower(Interpreter&, const Value& self, CallArgs& args) {
  return str_predicate(self, args, "islower", py_islower_text);
}
Expected<Value> str_isupper(Interpreter&, const Value& self, CallArgs& args) {
  return str_predicate(self, args, "isupper", py_isupper_text);
}

Expected<Value> str_find_common(const Value& self, CallArgs& args, std::string_view name,
                                bool from_right, bool must_exist) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments(name, args, {{"sub", std::nullopt}}));
  DRIFT_ASSIGN_OR_RETURN(std::string sub, string_argument(name, a[0]));
  const int64_t at = py_find(self.as_string(), sub, from_right);
  if (at < 0 && must_exist) return make_error("substring not found");
  return Value::integer(at);
}
Expected<Value> str_find(Interpreter&, const Value& self, CallArgs& args) {
  return str_find_common(self, args, "find", false, false);
}
Expected<Value> str_rfind(Interpreter&, const Value& self, CallArgs& args) {
  return str_find_common(self, args, "rfind", true, false);
}
Expected<Value> str_index(Interpreter&, const Value& self, CallArgs& args) {
  return str_find_common(self, args, "index", false, true);
}
Expected<Value> str_rindex(Interpreter&, const Value& self, CallArgs& args) {
  return str_find_common(self, args, "rindex", true, true);
}

Expected<Value> str_count(Interpreter&, const Value& self, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments("count", args, {{"sub", std::nullopt}}));
  DRIFT_ASSIGN_OR_RETURN(std::string sub, string_argument("count", a[0]));
  return Value::integer(py_count(self.as_string(), sub));
}

Expected<Value> str_join(Interpreter& in, const Value& self, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments("join", args, {{"iterable", std::nullopt}}));
  DRIFT_ASSIGN_OR_RETURN(std::shared_ptr<const List> items, in.iterate(a[0]));
  std::string out;
  for (size_t i = 0; i < items->items.size(); ++i) {
    const Value& item = items->items[i];
    if (!item.is_string()) {
      return make_error("sequence item {}: expected str instance, {} found", i, type_name(item));
    }
    if (i) out += self.as_string();
    out += item.as_string();
    DRIFT_RETURN_IF_ERROR(in.check_size(out.size()));
  }
  return text(std::move(out));
}

Expected<Value> str_format(Interpreter& in, const Value& self, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(std::string out, jinja::str_format(self.as_string(), args));
  DRIFT_RETURN_IF_ERROR(in.check_size(out.size()));
  return text(std::move(out));
}

Expected<Value> str_affix_remove(const Value& self, CallArgs& args, std::string_view name,
                                 bool suffix) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments(name, args, {{"affix", std::nullopt}}));
  DRIFT_ASSIGN_OR_RETURN(std::string affix, string_argument(name, a[0]));
  const std::string& s = self.as_string();
  if (suffix) {
    if (s.size() >= affix.size() && s.compare(s.size() - affix.size(), affix.size(), affix) == 0) {
      return text(s.substr(0, s.size() - affix.size()));
    }
  } else if (s.compare(0, affix.size(), affix) == 0) {
    return text(s.substr(affix.size()));
  }
  return self;
}
Expected<Value> str_removeprefix(Interpreter&, const Value& self, CallArgs& args) {
  return str_affix_remove(self, args, "removeprefix", false);
}
Expected<Value> str_removesuffix(Interpreter&, const Value& self, CallArgs& args) {
  return str_affix_remove(self, args, "removesuffix", true);
}

Expected<Value> str_partition_common(Interpreter& in, const Value& self, CallArgs& args,
                                     std::string_view name, bool from_right) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments(name, args, {{"sep", std::nullopt}}));
  DRIFT_ASSIGN_OR_RETURN(std::string sep, string_argument(name, a[0]));
  if (sep.empty()) return make_error("empty separator");
  const std::string& s = self.as_string();
  const size_t at = from_right ? s.rfind(sep) : s.find(sep);
  if (at == std::string::npos) {
    return in.make_list(from_right ? std::vector<Value>{text(""), text(""), self}
                                   : std::vector<Value>{self, text(""), text("")},
                        ListKind::kTuple);
  }
  return in.make_list({text(s.substr(0, at)), text(sep), text(s.substr(at + sep.size()))},
                      ListKind::kTuple);
}
Expected<Value> str_partition(Interpreter& in, const Value& self, CallArgs& args) {
  return str_partition_common(in, self, args, "partition", false);
}
Expected<Value> str_rpartition(Interpreter& in, const Value& self, CallArgs& args) {
  return str_partition_common(in, self, args, "rpartition", true);
}

constexpr NamedMethod kStringMethods[] = {
    {"capitalize", str_capitalize},
    {"count", str_count},
    {"endswith", str_endswith},
    {"find", str_find},
    {"format", str_format},
    {"index", str_index},
    {"isalnum", str_isalnum},
    {"isalpha", str_isalpha},
    {"isdigit", str_isdigit},
    {"islower", str_islower},
    {"isspace", str_isspace},
    {"isupper", str_isupper},
    {"join", str_join},
    {"lower", str_lower},
    {"lstrip", str_lstrip},
    {"partition", str_partition},
    {"removeprefix", str_removeprefix},
    {"removesuffix", str_removesuffix},
    {"replace", str_replace},
    {"rfind", str_rfind},
    {"rindex", str_rindex},
    {"rpartition", str_rpartition},
    {"rsplit", str_rsplit},
    {"rstrip", str_rstrip},
    {"split", str_split},
    {"splitlines", str_splitlines},
    {"startswith", str_startswith},
    {"strip", str_strip},
    {"title", str_title},
    {"upper", str_upper},
};

// ---- dict ----

Expected<Value> dict_get(Interpreter&, const Value& self, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a,
                         bind_arguments("get", args, {{"key", std::nullopt}, {"default", kNone}}));
  if (a[0].is_list() || a[0].is_dict()) return make_error("unhashable type: '{}'", type_name(a[0]));
  if (const Value* v = self.as_dict().find(a[0])) return *v;
  return a[1];
}

Expected<Value> dict_items(Interpreter& in, const Value& self, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("items", args, {}));
  std::vector<Value> pairs;
  for (const auto& [key, value] : self.as_dict().entries()) {
    pairs.push_back(Value::list({key, value}, ListKind::kTuple));
  }
  return in.make_list(std::move(pairs));
}

Expected<Value> dict_keys(Interpreter& in, const Value& self, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("keys", args, {}));
  std::vector<Value> keys;
  for (const auto& [key, value] : self.as_dict().entries()) keys.push_back(key);
  return in.make_list(std::move(keys));
}

Expected<Value> dict_values(Interpreter& in, const Value& self, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("values", args, {}));
  std::vector<Value> values;
  for (const auto& [key, value] : self.as_dict().entries()) values.push_back(value);
  return in.make_list(std::move(values));
}

Expected<Value> dict_copy(Interpreter&, const Value& self, CallArgs& args) {
  DRIFT_RETURN_IF_ERROR(bind_arguments("copy", args, {}));
  return Value::dict(self.as_dict());
}

constexpr NamedMethod kDictMethods[] = {
    {"copy", dict_copy}, {"get", dict_get},       {"items", dict_items},
    {"keys", dict_keys}, {"values", dict_values},
};

// ---- list and tuple ----

Expected<Value> list_count(Interpreter&, const Value& self, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments("count", args, {{"value", std::nullopt}}));
  const auto& items = self.as_list().items;
  return Value::integer(std::count_if(items.begin(), items.end(),
                                      [&](const Value& item) { return equals(item, a[0]); }));
}

Expected<Value> list_index(Interpreter&, const Value& self, CallArgs& args) {
  DRIFT_ASSIGN_OR_RETURN(auto a, bind_arguments("index", args, {{"value", std::nullopt}}));
  const auto& items = self.as_list().items;
  for (size_t i = 0; i < items.size(); ++i) {
    if (equals(items[i], a[0])) return Value::integer(static_cast<int64_t>(i));
  }
  return make_error("{} is not in list", py_repr(a[0]));
}

constexpr NamedMethod kListMethods[] = {{"count", list_count}, {"index", list_index}};

// What the immutable sandbox refuses.
constexpr std::string_view kListMutators[] = {"append", "clear",  "extend",  "insert",
                                              "pop",    "remove", "reverse", "sort"};
constexpr std::string_view kDictMutators[] = {"clear", "pop", "popitem", "setdefault", "update"};

template <size_t N>
std::optional<Value> bind(const Value& self, std::string_view name, const NamedMethod (&table)[N]) {
  for (const NamedMethod& m : table) {
    if (m.name != name) continue;
    const Method method = m.method;
    return Value::function(std::string(name), [self, method](Interpreter& in, CallArgs& args) {
      return method(in, self, args);
    });
  }
  return std::nullopt;
}

template <size_t N>
bool listed(std::string_view name, const std::string_view (&names)[N]) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

Value refused(const Value& self, std::string_view name) {
  return Value::undefined(
      fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, type_name(self)));
}

}  // namespace

std::optional<Value> find_method(const Value& object, std::string_view name) {
  switch (object.kind()) {
    case Value::Kind::kString:
      return bind(object, name, kStringMethods);
    case Value::Kind::kDict:
      if (listed(name, kDictMutators)) return refused(object, name);
      return bind(object, name, kDictMethods);
    case Value::Kind::kList:
      if (object.as_list().kind == ListKind::kGenerator) return std::nullopt;
      if (object.as_list().kind == ListKind::kList && listed(name, kListMutators)) {
        return refused(object, name);
      }
      return bind(object, name, kListMethods);
    default:
      return std::nullopt;
  }
}

}  // namespace drift::jinja
