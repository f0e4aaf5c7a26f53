#include "jinja/pyrepr.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "jinja/unicode.h"

namespace drift::jinja {

std::string py_float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";

  // Shortest round-trip digits, in scientific form: "-d.ddde+XX".
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(result.ptr - buf));
  const bool negative = sci.front() == '-';
  if (negative) sci.remove_prefix(1);
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+' ? 1 : 0), sci.data() + sci.size(),
                  exponent);

  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      const size_t int_len = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= int_len) {
        out += digits;
        out.append(int_len - digits.size(), '0');
        out += ".0";
      } else {
        out += digits.substr(0, int_len);
        out += '.';
        out += digits.substr(int_len);
      }
    } else {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    }
    return out;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out += digits.substr(1);
  }
  out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out;
}

std::string py_string_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back(quote);
  for (char32_t c : decode_utf8(text, Utf8Policy::kStrict)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (py_isprintable(c)) {
      append_utf8(c, out, Utf8Policy::kStrict);
    } else if (c <= 0xFF) {
      out += fmt::format("\\x{:02x}", static_cast<uint32_t>(c));
    } else if (c <= 0xFFFF) {
      out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<uint32_t>(c));
    }
  }
  out.push_back(quote);
  return out;
}

namespace {

void append_items(std::string& out, const std::vector<Value>& items) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    append_py_repr(out, items[i]);
  }
}

void append_dict(std::string& out, const Dict& dict) {
  out += '{';
  bool first = true;
  for (const auto& [key, value] : dict.entries()) {
    if (!first) out += ", ";
    first = false;
    append_py_repr(out, key);
    out += ": ";
    append_py_repr(out, value);
  }
  out += '}';
}

}  // namespace

void append_py_repr(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      out += "Undefined";
      return;
    case Value::Kind::kString:
      if (v.is_markup()) {
        out += "Markup(" + py_string_repr(v.as_string()) + ")";
      } else {
        out += py_string_repr(v.as_string());
      }
      return;
    case Value::Kind::kList: {
      const List& list = v.as_list();
      switch (list.kind) {
        case ListKind::kList:
          out += '[';
          append_items(out, list.items);
          out += ']';
          return;
        case ListKind::kTuple:
          out += '(';
          append_items(out, list.items);
          if (list.items.size() == 1) out += ',';
          out += ')';
          return;
        case ListKind::kGenerator:
          out += "<generator object>";
          return;
      }
      return;
    }
    case Value::Kind::kDict:
      append_dict(out, v.as_dict());
      return;
    case Value::Kind::kNamespace:
      // Namespaces may contain themselves, so their attributes are not printed.
      out += "<Namespace>";
      return;
    default:
      append_py_str(out, v);
  }
}

void append_py_str(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return;
    case Value::Kind::kNone:
      out += "None";
      return;
    case Value::Kind::kBool:
      out += v.as_bool() ? "True" : "False";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat:
      out += py_float_repr(v.as_float());
      return;
    case Value::Kind::kString:
      out += v.as_string();
      return;
    case Value::Kind::kLoop: {
      const LoopInfo& loop = v.as_loop();
      out += fmt::format("<LoopContext {}/{}>", loop.index0 + 1, loop.items->items.size());
      return;
    }
    case Value::Kind::kFunction:
      out += fmt::format("<function {}>", v.as_function().name);
      return;
    default:
      append_py_repr(out, v);
  }
}

std::string py_str(const Value& v) {
  if (v.is_string()) return v.as_string();
  std::string out;
  append_py_str(out, v);
  return out;
}

std::string py_repr(const Value& v) {
  std::string out;
  append_py_repr(out, v);
  return out;
}

}  // namespace drift::jinja
