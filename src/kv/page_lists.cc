#include "kv/page_lists.h"

namespace drift {

PageLists::PageLists(int32_t num_pages, int32_t num_lists)
    : num_pages_(num_pages),
      prev_(num_pages + num_lists),
      next_(num_pages + num_lists),
      list_of_(num_pages, -1),
      sizes_(num_lists, 0) {
  for (int32_t l = 0; l < num_lists; ++l) prev_[anchor(l)] = next_[anchor(l)] = anchor(l);
}

void PageLists::push_back(int32_t list, PageId page) {
  assert(!linked(page));
  int32_t a = anchor(list);
  int32_t last = prev_[a];
  next_[last] = page;
  prev_[page] = last;
  next_[page] = a;
  prev_[a] = page;
  list_of_[page] = list;
  ++sizes_[list];
}

void PageLists::remove(PageId page) {
  assert(linked(page));
  next_[prev_[page]] = next_[page];
  prev_[next_[page]] = prev_[page];
  --sizes_[list_of_[page]];
  list_of_[page] = -1;
}

std::optional<PageId> PageLists::front(int32_t list) const {
  int32_t first = next_[anchor(list)];
  if (first == anchor(list)) return std::nullopt;
  return first;
}

std::optional<PageId> PageLists::next(PageId page) const {
  assert(linked(page));
  const int32_t after = next_[page];
  if (after >= num_pages_) return std::nullopt;  // the list's anchor
  return after;
}

std::optional<PageId> PageLists::pop_front(int32_t list) {
  std::optional<PageId> page = front(list);
  if (page) remove(*page);
  return page;
}

std::optional<int32_t> PageLists::list_of(PageId page) const {
  if (list_of_[page] < 0) return std::nullopt;
  return list_of_[page];
}

std::vector<PageId> PageLists::to_vector(int32_t list) const {
  std::vector<PageId> pages;
  for (int32_t n = next_[anchor(list)]; n != anchor(list); n = next_[n]) pages.push_back(n);
  return pages;
}

bool PageLists::consistent() const {
  int32_t linked_pages = 0;
  for (int32_t l = 0; l < static_cast<int32_t>(sizes_.size()); ++l) {
    int32_t count = 0;
    for (int32_t n = next_[anchor(l)]; n != anchor(l); n = next_[n]) {
      if (n < 0 || n >= num_pages_ || list_of_[n] != l || prev_[next_[n]] != n) return false;
      if (++count > num_pages_) return false;  // a cycle
    }
    if (count != sizes_[l]) return false;
    linked_pages += count;
  }
  int32_t marked = 0;
  for (int32_t p = 0; p < num_pages_; ++p) marked += list_of_[p] >= 0;
  return marked == linked_pages;
}

}  // namespace drift
