#include "jinja/json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "jinja/error_kind.h"
#include "jinja/pyrepr.h"
#include "jinja/unicode.h"

namespace drift::jinja {
namespace {

Expected<Value> convert(const Json& json, uint32_t depth_left) {
  switch (json.type()) {
    case Json::value_t::null:
      return Value::none();
    case Json::value_t::boolean:
      return Value::boolean(json.get<bool>());
    case Json::value_t::number_integer:
      return Value::integer(json.get<int64_t>());
    case Json::value_t::number_unsigned: {
      const auto u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) {
        return make_error("integer {} is out of the 64-bit range templates compute with", u);
      }
      return Value::integer(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float:
      return Value::number(json.get<double>());
    case Json::value_t::string:
      return Value::string(json.get<std::string>());
    case Json::value_t::array: {
      if (depth_left == 0) return make_error("JSON input is nested too deeply");
      std::vector<Value> items;
      items.reserve(json.size());
      for (const Json& item : json) {
        DRIFT_ASSIGN_OR_RETURN(Value v, convert(item, depth_left - 1));
        items.push_back(std::move(v));
      }
      return Value::list(std::move(items));
    }
    case Json::value_t::object: {
      if (depth_left == 0) return make_error("JSON input is nested too deeply");
      Dict dict;
      for (const auto& [key, item] : json.items()) {
        DRIFT_ASSIGN_OR_RETURN(Value v, convert(item, depth_left - 1));
        dict.set(key, std::move(v));
      }
      return Value::dict(std::move(dict));
    }
    case Json::value_t::binary:
    case Json::value_t::discarded:
      break;
  }
  return make_error("JSON value of type {} cannot be given to a template", json.type_name());
}

class JsonWriter {
 public:
  JsonWriter(const JsonDumpOptions& options, size_t max_bytes)
      : options_(options), max_bytes_(max_bytes) {}

  Status write(const Value& v, size_t level) {
    switch (v.kind()) {
      case Value::Kind::kNone:
        out_ += "null";
        break;
      case Value::Kind::kBool:
        out_ += v.as_bool() ? "true" : "false";
        break;
      case Value::Kind::kInt:
        out_ += std::to_string(v.as_int());
        break;
      case Value::Kind::kFloat:
        write_float(v.as_float());
        break;
      case Value::Kind::kString:
        write_string(v.as_string());
        break;
      case Value::Kind::kList:
        if (v.as_list().kind == ListKind::kGenerator) return not_serializable(v);
        DRIFT_RETURN_IF_ERROR(write_list(v.as_list().items, level));
        break;
      case Value::Kind::kDict:
        DRIFT_RETURN_IF_ERROR(write_dict(v.as_dict(), level));
        break;
      default:
        return not_serializable(v);
    }
    if (out_.size() > max_bytes_) {
      return make_kind_error(ErrorKind::kLimit,
                             "tojson output exceeds the template output limit of {} bytes",
                             max_bytes_);
    }
    return Status::Ok();
  }

  std::string take() { return std::move(out_); }

 private:
  static Status not_serializable(const Value& v) {
    return make_error("Object of type {} is not JSON serializable", type_name(v));
  }

  void write_float(double x) {
    if (std::isnan(x)) {
      out_ += "NaN";
    } else if (std::isinf(x)) {
      out_ += x > 0 ? "Infinity" : "-Infinity";
    } else {
      out_ += py_float_repr(x);
    }
  }

  void write_string(const std::string& s) {
    out_.push_back('"');
    auto escape_code_unit = [&](uint32_t unit) { out_ += fmt::format("\\u{:04x}", unit); };
    auto write_plain = [&](char32_t c) {
      switch (c) {
        case '"':
          out_ += "\\\"";
          return;
        case '\\':
          out_ += "\\\\";
          return;
        case '\n':
          out_ += "\\n";
          return;
        case '\r':
          out_ += "\\r";
          return;
        case '\t':
          out_ += "\\t";
          return;
        case '\b':
          out_ += "\\b";
          return;
        case '\f':
          out_ += "\\f";
          return;
        default:
          break;
      }
      if (c < 0x20) {
        escape_code_unit(c);
      } else if (c < 0x80 || !options_.ensure_ascii) {
        append_utf8(c, out_, Utf8Policy::kStrict);
      } else if (c <= 0xFFFF) {
        escape_code_unit(c);
      } else {
        const char32_t v = c - 0x10000;
        escape_code_unit(0xD800 | (v >> 10));
        escape_code_unit(0xDC00 | (v & 0x3FF));
      }
    };
    if (is_ascii(s)) {
      for (char c : s) write_plain(static_cast<unsigned char>(c));
    } else {
      for (char32_t c : decode_utf8(s, Utf8Policy::kStrict)) write_plain(c);
    }
    out_.push_back('"');
  }

  Status newline(size_t level) {
    // The indent comes from the template and repeats per level: check before writing it.
    if (out_.size() + 1 + level * options_.indent->size() > max_bytes_) {
      return make_kind_error(ErrorKind::kLimit,
                             "tojson output exceeds the template output limit of {} bytes",
                             max_bytes_);
    }
    out_.push_back('\n');
    for (size_t i = 0; i < level; ++i) out_ += *options_.indent;
    return Status::Ok();
  }

  Status write_list(const std::vector<Value>& items, size_t level) {
    if (items.empty()) {
      out_ += "[]";
      return Status::Ok();
    }
    out_.push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out_ += item_separator();
      if (options_.indent) DRIFT_RETURN_IF_ERROR(newline(level + 1));
      DRIFT_RETURN_IF_ERROR(write(items[i], level + 1));
    }
    if (options_.indent) DRIFT_RETURN_IF_ERROR(newline(level));
    out_.push_back(']');
    return Status::Ok();
  }

  Status write_dict(const Dict& dict, size_t level) {
    if (dict.empty()) {
      out_ += "{}";
      return Status::Ok();
    }
    std::vector<const std::pair<Value, Value>*> entries;
    entries.reserve(dict.size());
    for (const auto& entry : dict.entries()) entries.push_back(&entry);
    if (options_.sort_keys) {
      std::optional<Error> failure;
      std::stable_sort(entries.begin(), entries.end(), [&](const auto* a, const auto* b) {
        if (failure) return false;
        auto order = compare(a->first, b->first);
        if (!order.ok()) failure = order.error();
        return order.ok() && *order < 0;
      });
      if (failure) return *failure;
    }
    out_.push_back('{');
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) out_ += item_separator();
      if (options_.indent) DRIFT_RETURN_IF_ERROR(newline(level + 1));
      write_string(key_text(entries[i]->first));
      out_ += options_.key_separator;
      DRIFT_RETURN_IF_ERROR(write(entries[i]->second, level + 1));
    }
    if (options_.indent) DRIFT_RETURN_IF_ERROR(newline(level));
    out_.push_back('}');
    return Status::Ok();
  }

  const std::string& item_separator() const { return options_.item_separator; }

  // json.dumps turns non-str keys into strings: 1 -> "1", True -> "true", None -> "null".
  static std::string key_text(const Value& key) {
    if (key.is_string()) return key.as_string();
    if (key.is_bool()) return key.as_bool() ? "true" : "false";
    if (key.is_none()) return "null";
    if (key.is_int()) return std::to_string(key.as_int());
    const double f = key.as_float();
    if (std::isnan(f)) return "NaN";
    if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
    return py_float_repr(f);
  }

  const JsonDumpOptions& options_;
  size_t max_bytes_;
  std::string out_;
};

}  // namespace

Expected<Value> value_from_json(const Json& json, uint32_t max_depth) {
  return convert(json, max_depth);
}

Expected<std::string> json_dumps(const Value& value, const JsonDumpOptions& options,
                                 size_t max_bytes) {
  JsonWriter writer(options, max_bytes);
  DRIFT_RETURN_IF_ERROR(writer.write(value, 0));
  return writer.take();
}

}  // namespace drift::jinja
