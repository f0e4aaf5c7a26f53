// Compact views of a StepPlan for tests that pin exact items and page ids.
#pragma once

#include <numeric>
#include <ostream>
#include <vector>

#include "scheduler/step_plan.h"

namespace drift::testing {

// (seq, kind, start, tokens, sample) of one item.
struct ItemView {
  SeqId seq;
  StepItemKind kind;
  int32_t start;
  int32_t tokens;
  bool sample;
  bool operator==(const ItemView&) const = default;
};
inline std::ostream& operator<<(std::ostream& os, const ItemView& v) {
  return os << "{seq " << v.seq << (v.kind == StepItemKind::kDecode ? " decode " : " prefill ")
            << v.start << "+" << v.tokens << (v.sample ? " sample}" : "}");
}
constexpr StepItemKind P = StepItemKind::kPrefill;
constexpr StepItemKind D = StepItemKind::kDecode;

inline std::vector<ItemView> items_of(const StepPlan& plan) {
  std::vector<ItemView> v;
  for (const StepItem& i : plan.items)
    v.push_back({i.seq_id, i.kind, i.start_position, i.num_tokens, i.sample});
  return v;
}

inline std::vector<PageId> pages_of(const StepPlan& plan, size_t item) {
  auto s = plan.pages(plan.items[item]);
  return std::vector<PageId>(s.begin(), s.end());
}

// Every scheduled token's KV slot, in plan order (what the executor writes to).
inline std::vector<int64_t> slot_mapping(const StepPlan& plan) {
  std::vector<int64_t> slots;
  for (const StepItem& item : plan.items)
    for (int32_t k = 0; k < item.num_tokens; ++k) slots.push_back(plan.slot(item, k));
  return slots;
}

inline std::vector<PageId> range(PageId from, PageId to) {
  std::vector<PageId> p(size_t(to - from));
  std::iota(p.begin(), p.end(), from);
  return p;
}

inline std::vector<PageId> concat(std::vector<PageId> a, const std::vector<PageId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace drift::testing
