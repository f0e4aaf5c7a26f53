// The filter functions of filters.cc's table, by kind, and what the three files of filters share.
// Not for use outside the filters_*.cc files.
#pragma once

#include <string>

#include "jinja/builtins.h"
#include "jinja/value.h"

namespace drift::jinja {

inline const Value kNone = Value::none();
inline const Value kFalse = Value::boolean(false);
inline const Value kTrue = Value::boolean(true);

inline Value text(std::string s) { return Value::string(std::move(s)); }

// Text (filters_text.cc)
Expected<Value> filter_capitalize(Interpreter&, const Value& v, CallArgs& args);
Expected<Value> filter_escape(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_format(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_indent(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_lower(Interpreter&, const Value& v, CallArgs& args);
Expected<Value> filter_upper(Interpreter&, const Value& v, CallArgs& args);
Expected<Value> filter_replace(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_safe(Interpreter&, const Value& v, CallArgs& args);
Expected<Value> filter_string(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_title(Interpreter&, const Value& v, CallArgs& args);
Expected<Value> filter_tojson(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_trim(Interpreter&, const Value& v, CallArgs& args);
Expected<Value> filter_wordcount(Interpreter&, const Value& v, CallArgs& args);

// Numbers (filters_number.cc)
Expected<Value> filter_abs(Interpreter&, const Value& v, CallArgs& args);
Expected<Value> filter_float(Interpreter&, const Value& v, CallArgs& args);
Expected<Value> filter_int(Interpreter&, const Value& v, CallArgs& args);
Expected<Value> filter_round(Interpreter&, const Value& v, CallArgs& args);

// Values and collections (filters_collection.cc)
Expected<Value> filter_attr(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_default(Interpreter&, const Value& v, CallArgs& args);
Expected<Value> filter_dictsort(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_first(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_last(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_items(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_join(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_length(Interpreter&, const Value& v, CallArgs& args);
Expected<Value> filter_list(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_map(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_max(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_min(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_select(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_reject(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_selectattr(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_rejectattr(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_reverse(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_sort(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_sum(Interpreter& in, const Value& v, CallArgs& args);
Expected<Value> filter_unique(Interpreter& in, const Value& v, CallArgs& args);

}  // namespace drift::jinja
