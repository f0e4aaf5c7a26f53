#include "tokenizer/unicode_categories.h"

#include <algorithm>
#include <array>
#include <iterator>

namespace drift {
namespace {

struct ClassRange {
  uint32_t first;  // the range runs up to the next entry's `first`
  CodepointClass cls;
};

constexpr ClassRange kClassRanges[] = {
#include "tokenizer/unicode_category_table.inc"
};

// ASCII is most of most text: answer it without the binary search.
constexpr std::array<CodepointClass, 128> make_ascii_classes() {
  std::array<CodepointClass, 128> classes{};
  size_t range = 0;
  for (uint32_t cpt = 0; cpt < 128; ++cpt) {
    while (range + 1 < std::size(kClassRanges) && kClassRanges[range + 1].first <= cpt) ++range;
    classes[cpt] = kClassRanges[range].cls;
  }
  return classes;
}

constexpr std::array<CodepointClass, 128> kAsciiClasses = make_ascii_classes();

}  // namespace

CodepointClass codepoint_class(uint32_t cpt) {
  if (cpt < 128) return kAsciiClasses[cpt];
  if (cpt > 0x10FFFF) return CodepointClass::kUndefined;
  // The last range whose start is <= cpt.
  const auto after = std::upper_bound(std::begin(kClassRanges), std::end(kClassRanges), cpt,
                                      [](uint32_t c, const ClassRange& r) { return c < r.first; });
  return std::prev(after)->cls;
}

bool is_unicode_whitespace(uint32_t cpt) {
  if (cpt <= 0x20) return cpt == 0x20 || (cpt >= 0x09 && cpt <= 0x0D);
  switch (cpt) {
    case 0x0085:
    case 0x00A0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cpt >= 0x2000 && cpt <= 0x200A;
  }
}

}  // namespace drift
