#include "jinja/pyformat.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "jinja/pyrepr.h"
#include "jinja/unicode.h"

namespace drift::jinja {
namespace {

// Widths and precisions come from the template; cap them so "%999999999d" cannot allocate
// gigabytes before any output limit is checked.
constexpr int64_t kMaxWidth = 1 << 20;

// Pads `body` (whose sign/prefix, if any, is `head`) to `width` code points. Alignment '<', '>',
// '^' or '=' (padding between head and body).
std::string pad(std::string head, std::string body, int64_t width, char32_t fill, char align) {
  const auto length = static_cast<int64_t>(utf8_length(head) + utf8_length(body));
  if (length >= width) return head + body;
  const int64_t missing = width - length;
  std::string fill_text;
  append_utf8(fill, fill_text, Utf8Policy::kStrict);
  auto repeat = [&](int64_t n) {
    std::string s;
    for (int64_t i = 0; i < n; ++i) s += fill_text;
    return s;
  };
  switch (align) {
    case '<':
      return head + body + repeat(missing);
    case '^':
      return repeat(missing / 2) + head + body + repeat(missing - missing / 2);
    case '=':
      return head + repeat(missing) + body;
    default:
      return repeat(missing) + head + body;
  }
}

std::string to_base(uint64_t magnitude, int base, bool upper_case) {
  if (magnitude == 0) return "0";
  const char* digits = upper_case ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  while (magnitude) {
    out.insert(out.begin(), digits[magnitude % static_cast<uint64_t>(base)]);
    magnitude /= static_cast<uint64_t>(base);
  }
  return out;
}

uint64_t magnitude_of(int64_t v) {
  return v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v);
}

// A C printf conversion of one double, for the float types where Python and C agree.
std::string c_format_double(double x, char type, int64_t precision, bool alternate) {
  const std::string spec =
      fmt::format("%{}.{}{}", alternate ? "#" : "", std::min<int64_t>(precision, 1000), type);
  char buf[1200];
  const int n = std::snprintf(buf, sizeof(buf), spec.c_str(), x);
  if (n < 0) return "";
  if (static_cast<size_t>(n) < sizeof(buf)) return std::string(buf, static_cast<size_t>(n));
  std::string big(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(big.data(), big.size(), spec.c_str(), x);
  big.resize(static_cast<size_t>(n));
  return big;
}

std::string take_code_points(const std::string& text, int64_t count) {
  if (count < 0) return text;
  if (is_ascii(text)) return text.substr(0, static_cast<size_t>(count));
  std::u32string points = decode_utf8(text, Utf8Policy::kStrict);
  if (static_cast<int64_t>(points.size()) > count) points.resize(static_cast<size_t>(count));
  return encode_utf8(points, Utf8Policy::kStrict);
}

// ---- printf-style ----------------------------------------------------------------------------

struct PercentSpec {
  bool left = false, plus = false, space = false, alternate = false, zero = false;
  int64_t width = 0;
  int64_t precision = -1;
  char type = 's';
};

std::string sign_of(bool negative, bool plus, bool space) {
  if (negative) return "-";
  if (plus) return "+";
  if (space) return " ";
  return "";
}

Expected<std::string> percent_integer(const Value& v, const PercentSpec& spec) {
  int64_t n = 0;
  if (v.is_integral()) {
    n = v.as_int();
  } else if (v.is_float() && (spec.type == 'd' || spec.type == 'i' || spec.type == 'u')) {
    const double f = std::trunc(v.as_float());
    if (!std::isfinite(f) || f >= 9.2e18 || f <= -9.2e18) {
      return make_error("cannot convert float {} to integer", py_float_repr(v.as_float()));
    }
    n = static_cast<int64_t>(f);
  } else {
    return make_error(
        "%{} format: {} is required, not {}", spec.type,
        spec.type == 'd' || spec.type == 'i' || spec.type == 'u' ? "a real number" : "an integer",
        type_name(v));
  }
  const int base = spec.type == 'o' ? 8 : (spec.type == 'x' || spec.type == 'X') ? 16 : 10;
  std::string digits = to_base(magnitude_of(n), base, spec.type == 'X');
  if (spec.precision > static_cast<int64_t>(digits.size())) {
    digits.insert(0, static_cast<size_t>(spec.precision) - digits.size(), '0');
  }
  std::string head = sign_of(n < 0, spec.plus, spec.space);
  if (spec.alternate && base != 10)
    head += spec.type == 'o' ? "0o" : (spec.type == 'x' ? "0x" : "0X");
  if (spec.left) return pad(head, digits, spec.width, ' ', '<');
  if (spec.zero) return pad(head, digits, spec.width, '0', '=');
  return pad(head, digits, spec.width, ' ', '>');
}

Expected<std::string> percent_float(const Value& v, const PercentSpec& spec) {
  if (!v.is_number()) {
    return make_error("must be real number, not {}", type_name(v));
  }
  const double x = v.as_float();
  const int64_t precision = spec.precision < 0 ? 6 : spec.precision;
  std::string body = c_format_double(std::fabs(x), spec.type, precision, spec.alternate);
  std::string head = sign_of(std::signbit(x) && !std::isnan(x), spec.plus, spec.space);
  if (spec.left) return pad(head, body, spec.width, ' ', '<');
  if (spec.zero && std::isfinite(x)) return pad(head, body, spec.width, '0', '=');
  return pad(head, body, spec.width, ' ', '>');
}

Expected<std::string> percent_convert(const Value& v, const PercentSpec& spec) {
  switch (spec.type) {
    case 's':
    case 'r':
    case 'a': {
      std::string text = spec.type == 's' ? py_str(v) : py_repr(v);
      text = take_code_points(text, spec.precision);
      return pad("", text, spec.width, ' ', spec.left ? '<' : '>');
    }
    case 'd':
    case 'i':
    case 'u':
    case 'o':
    case 'x':
    case 'X':
      return percent_integer(v, spec);
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
      return percent_float(v, spec);
    case 'c': {
      std::string text;
      if (v.is_integral() && v.as_int() >= 0 && v.as_int() <= 0x10FFFF) {
        append_utf8(static_cast<char32_t>(v.as_int()), text, Utf8Policy::kStrict);
      } else if (v.is_string() && utf8_length(v.as_string()) == 1) {
        text = v.as_string();
      } else {
        return make_error("%c requires an int or a unicode character, not {}", type_name(v));
      }
      return pad("", text, spec.width, ' ', spec.left ? '<' : '>');
    }
    default:
      return make_error("unsupported format character '{}'", spec.type);
  }
}

// ---- str.format ------------------------------------------------------------------------------

struct FormatSpec {
  std::optional<char32_t> fill;
  char align = 0;
  char sign = '-';
  bool alternate = false;
  int64_t width = 0;
  char grouping = 0;
  int64_t precision = -1;
  char type = 0;
};

Expected<FormatSpec> parse_format_spec(std::string_view text) {
  FormatSpec spec;
  const std::u32string points = decode_utf8(text, Utf8Policy::kStrict);
  size_t i = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (points.size() >= 2 && is_align(points[1])) {
    spec.fill = points[0];
    spec.align = static_cast<char>(points[1]);
    i = 2;
  } else if (!points.empty() && is_align(points[0])) {
    spec.align = static_cast<char>(points[0]);
    i = 1;
  }
  if (i < points.size() && (points[i] == '+' || points[i] == '-' || points[i] == ' ')) {
    spec.sign = static_cast<char>(points[i++]);
  }
  if (i < points.size() && points[i] == '#') {
    spec.alternate = true;
    ++i;
  }
  if (i < points.size() && points[i] == '0') {
    if (!spec.fill) spec.fill = U'0';
    if (!spec.align) spec.align = '=';
    ++i;
  }
  auto read_number = [&]() -> int64_t {
    int64_t n = 0;
    while (i < points.size() && points[i] >= '0' && points[i] <= '9') {
      n = std::min<int64_t>(n * 10 + (points[i] - '0'), kMaxWidth);
      ++i;
    }
    return n;
  };
  spec.width = read_number();
  if (i < points.size() && (points[i] == ',' || points[i] == '_')) {
    spec.grouping = static_cast<char>(points[i++]);
  }
  if (i < points.size() && points[i] == '.') {
    ++i;
    if (i >= points.size() || points[i] < '0' || points[i] > '9') {
      return make_error("Format specifier missing precision");
    }
    spec.precision = read_number();
  }
  if (i < points.size()) {
    const char32_t t = points[i++];
    if (t > 0x7F ||
        std::string_view("sdbonxXceEfFgG%").find(static_cast<char>(t)) == std::string_view::npos) {
      return make_error("Invalid format specifier '{}'", text);
    }
    spec.type = static_cast<char>(t);
  }
  if (i != points.size()) return make_error("Invalid format specifier '{}'", text);
  return spec;
}

std::string group_digits(const std::string& digits, char separator, size_t every) {
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    if (i && (n - i) % every == 0) out.push_back(separator);
    out.push_back(digits[i]);
  }
  return out;
}

std::string apply_sign(bool negative, char sign) {
  if (negative) return "-";
  if (sign == '+') return "+";
  if (sign == ' ') return " ";
  return "";
}

Expected<std::string> format_float(double x, const FormatSpec& spec) {
  std::string body;
  const double magnitude = std::fabs(x);
  char type = spec.type;
  if (type == 0 && spec.precision < 0) {
    body = py_float_repr(magnitude);
  } else if (type == 0) {
    body = c_format_double(magnitude, 'g', std::max<int64_t>(spec.precision, 1), spec.alternate);
    if (std::isfinite(magnitude) && body.find_first_of(".e") == std::string::npos) body += ".0";
  } else if (type == '%') {
    body = c_format_double(magnitude * 100, 'f', spec.precision < 0 ? 6 : spec.precision,
                           spec.alternate) +
           "%";
  } else {
    if (type == 'n') type = 'g';
    body =
        c_format_double(magnitude, type, spec.precision < 0 ? 6 : spec.precision, spec.alternate);
  }
  if (spec.grouping && std::isfinite(magnitude)) {
    const size_t end = body.find_first_not_of("0123456789");
    body = group_digits(body.substr(0, end), spec.grouping, 3) +
           (end == std::string::npos ? "" : body.substr(end));
  }
  return pad(apply_sign(std::signbit(x) && !std::isnan(x), spec.sign), body, spec.width,
             spec.fill.value_or(U' '), spec.align ? spec.align : '>');
}

Expected<std::string> format_value(const Value& v, std::string_view spec_text) {
  // object.__format__ with an empty spec is str(); bool is an int only under a non-empty spec.
  if (spec_text.empty()) return py_str(v);
  DRIFT_ASSIGN_OR_RETURN(FormatSpec spec, parse_format_spec(spec_text));
  if (v.is_string()) {
    if (spec.type && spec.type != 's') {
      return make_error("Unknown format code '{}' for object of type 'str'", spec.type);
    }
    if (spec.sign != '-') return make_error("Sign not allowed in string format specifier");
    const std::string text = take_code_points(v.as_string(), spec.precision);
    return pad("", text, spec.width, spec.fill.value_or(U' '), spec.align ? spec.align : '<');
  }
  if (v.is_integral()) {
    const char type = spec.type;
    if (type == 'e' || type == 'E' || type == 'f' || type == 'F' || type == 'g' || type == 'G' ||
        type == '%') {
      return format_float(v.as_float(), spec);
    }
    if (spec.precision >= 0) return make_error("Precision not allowed in integer format specifier");
    const int64_t n = v.as_int();
    std::string body;
    std::string prefix;
    if (type == 'c') {
      if (n < 0 || n > 0x10FFFF) return make_error("%c arg not in range(0x110000)");
      append_utf8(static_cast<char32_t>(n), body, Utf8Policy::kStrict);
      return pad("", body, spec.width, spec.fill.value_or(U' '), spec.align ? spec.align : '<');
    }
    const int base = type == 'b' ? 2 : type == 'o' ? 8 : (type == 'x' || type == 'X') ? 16 : 10;
    body = to_base(magnitude_of(n), base, type == 'X');
    if (spec.grouping) body = group_digits(body, spec.grouping, base == 10 ? 3 : 4);
    if (spec.alternate && base != 10) {
      prefix = type == 'b' ? "0b" : type == 'o' ? "0o" : (type == 'x' ? "0x" : "0X");
    }
    return pad(apply_sign(n < 0, spec.sign) + prefix, body, spec.width, spec.fill.value_or(U' '),
               spec.align ? spec.align : '>');
  }
  if (v.is_float()) {
    if (spec.type && std::string_view("eEfFgG%").find(spec.type) == std::string_view::npos) {
      return make_error("Unknown format code '{}' for object of type 'float'", spec.type);
    }
    return format_float(v.as_float(), spec);
  }
  return make_error("unsupported format string passed to {}.__format__", type_name(v));
}

}  // namespace

Expected<std::string> percent_format(std::string_view format, const Value& args) {
  std::vector<Value> positional;
  const Dict* mapping = nullptr;
  if (args.is_list() && args.as_list().kind == ListKind::kTuple) {
    positional = args.as_list().items;
  } else {
    positional.push_back(args);
    if (args.is_dict()) mapping = &args.as_dict();
  }
  size_t next = 0;
  bool used_mapping = false;
  auto next_arg = [&]() -> Expected<Value> {
    if (next >= positional.size()) return make_error("not enough arguments for format string");
    return positional[next++];
  };

  std::string out;
  size_t i = 0;
  while (i < format.size()) {
    const size_t percent = format.find('%', i);
    if (percent == std::string_view::npos) {
      out.append(format.substr(i));
      break;
    }
    out.append(format.substr(i, percent - i));
    i = percent + 1;
    if (i >= format.size()) return make_error("incomplete format");
    std::optional<std::string> key;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string_view::npos) return make_error("incomplete format key");
      key = std::string(format.substr(i + 1, close - i - 1));
      i = close + 1;
    }
    PercentSpec spec;
    for (; i < format.size(); ++i) {
      const char c = format[i];
      if (c == '-') {
        spec.left = true;
      } else if (c == '+') {
        spec.plus = true;
      } else if (c == ' ') {
        spec.space = true;
      } else if (c == '#') {
        spec.alternate = true;
      } else if (c == '0') {
        spec.zero = true;
      } else {
        break;
      }
    }
    auto read_count = [&](int64_t& target) -> Status {
      if (i < format.size() && format[i] == '*') {
        ++i;
        DRIFT_ASSIGN_OR_RETURN(Value n, next_arg());
        if (!n.is_integral()) return make_error("* wants int");
        target = std::clamp<int64_t>(n.as_int(), -kMaxWidth, kMaxWidth);
        return Status::Ok();
      }
      int64_t n = 0;
      bool any = false;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        n = std::min<int64_t>(n * 10 + (format[i] - '0'), kMaxWidth);
        ++i;
        any = true;
      }
      if (any) target = n;
      return Status::Ok();
    };
    DRIFT_RETURN_IF_ERROR(read_count(spec.width));
    if (spec.width < 0) {
      spec.left = true;
      spec.width = -spec.width;
    }
    if (i < format.size() && format[i] == '.') {
      ++i;
      spec.precision = 0;
      DRIFT_RETURN_IF_ERROR(read_count(spec.precision));
    }
    while (i < format.size() && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L')) ++i;
    if (i >= format.size()) return make_error("incomplete format");
    spec.type = format[i++];
    if (spec.type == '%') {
      out.push_back('%');
      continue;
    }
    Value arg;
    if (key) {
      if (!mapping) return make_error("format requires a mapping");
      const Value* found = mapping->find(*key);
      if (!found) return make_error("KeyError: {}", py_string_repr(*key));
      arg = *found;
      used_mapping = true;
    } else {
      DRIFT_ASSIGN_OR_RETURN(arg, next_arg());
    }
    DRIFT_ASSIGN_OR_RETURN(std::string converted, percent_convert(arg, spec));
    out += converted;
  }
  if (next < positional.size() && !used_mapping && !mapping) {
    return make_error("not all arguments converted during string formatting");
  }
  return out;
}

Expected<std::string> str_format(std::string_view format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  bool used_auto = false, used_manual = false;
  size_t i = 0;
  while (i < format.size()) {
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out.push_back('}');
        i += 2;
        continue;
      }
      return Error{"Single '}' encountered in format string"};
    }
    if (c != '{') {
      out.push_back(c);
      ++i;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out.push_back('{');
      i += 2;
      continue;
    }
    const size_t close = format.find('}', i);
    if (close == std::string_view::npos) return Error{"expected '}' before end of string"};
    std::string_view field = format.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string_view::npos) {
      return make_error("nested replacement fields are not supported");
    }
    i = close + 1;
    std::string_view spec;
    if (const size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    char conversion = 0;
    if (const size_t bang = field.find('!'); bang != std::string_view::npos) {
      if (bang + 2 != field.size()) return make_error("expected ':' after conversion specifier");
      conversion = field[bang + 1];
      field = field.substr(0, bang);
    }
    if (field.find_first_of(".[") != std::string_view::npos) {
      return make_error("attribute and index look-ups in format fields are not supported");
    }
    Value value;
    if (field.empty() || (field[0] >= '0' && field[0] <= '9')) {
      size_t index = 0;
      if (field.empty()) {
        if (used_manual) {
          return make_error(
              "cannot switch from manual field specification to automatic field "
              "numbering");
        }
        used_auto = true;
        index = auto_index++;
      } else {
        if (used_auto) {
          return make_error(
              "cannot switch from automatic field numbering to manual field "
              "specification");
        }
        used_manual = true;
        for (char d : field) {
          if (d < '0' || d > '9') return make_error("invalid format field '{}'", field);
          index = std::min<size_t>(index * 10 + static_cast<size_t>(d - '0'), 1 << 20);
        }
      }
      if (index >= args.positional.size()) {
        return make_error("Replacement index {} out of range for positional args tuple", index);
      }
      value = args.positional[index];
    } else {
      bool found = false;
      for (const auto& [name, v] : args.keywords) {
        if (name == field) {
          value = v;
          found = true;
        }
      }
      if (!found) return make_error("KeyError: {}", py_string_repr(field));
    }
    if (conversion == 's') {
      value = Value::string(py_str(value));
    } else if (conversion == 'r' || conversion == 'a') {
      value = Value::string(py_repr(value));
    } else if (conversion != 0) {
      return make_error("Unknown conversion specifier {}", conversion);
    }
    DRIFT_ASSIGN_OR_RETURN(std::string formatted, format_value(value, spec));
    out += formatted;
  }
  return out;
}

}  // namespace drift::jinja
