// jinja2's builtin filters as Hugging Face's chat template environment has them (its own tojson
// included), by name. The filters themselves live by kind in filters_text.cc, filters_number.cc
// and filters_collection.cc.
#include <string_view>

#include "jinja/builtins.h"
#include "jinja/filters_internal.h"

namespace drift::jinja {
namespace {

struct NamedFilter {
  std::string_view name;
  FilterFunction function;
};

constexpr NamedFilter kFilters[] = {
    {"abs", filter_abs},
    {"attr", filter_attr},
    {"capitalize", filter_capitalize},
    {"count", filter_length},
    {"d", filter_default},
    {"default", filter_default},
    {"dictsort", filter_dictsort},
    {"e", filter_escape},
    {"escape", filter_escape},
    {"first", filter_first},
    {"float", filter_float},
    {"format", filter_format},
    {"indent", filter_indent},
    {"int", filter_int},
    {"items", filter_items},
    {"join", filter_join},
    {"last", filter_last},
    {"length", filter_length},
    {"list", filter_list},
    {"lower", filter_lower},
    {"map", filter_map},
    {"max", filter_max},
    {"min", filter_min},
    {"reject", filter_reject},
    {"rejectattr", filter_rejectattr},
    {"replace", filter_replace},
    {"reverse", filter_reverse},
    {"round", filter_round},
    {"safe", filter_safe},
    {"select", filter_select},
    {"selectattr", filter_selectattr},
    {"sort", filter_sort},
    {"string", filter_string},
    {"sum", filter_sum},
    {"title", filter_title},
    {"tojson", filter_tojson},
    {"trim", filter_trim},
    {"unique", filter_unique},
    {"upper", filter_upper},
    {"wordcount", filter_wordcount},
};

}  // namespace

FilterFunction find_filter(std::string_view name) {
  for (const NamedFilter& f : kFilters) {
    if (f.name == name) return f.function;
  }
  return nullptr;
}

}  // namespace drift::jinja
