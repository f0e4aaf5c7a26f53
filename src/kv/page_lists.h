// Intrusive doubly linked lists over page ids: every page is in at most one list, and push_back,
// pop_front and removal from the middle are all O(1), so the order pages leave a list (the
// eviction order) is exact. One pair of link arrays serves all lists: node i < num_pages is page
// i; node num_pages + l is the anchor of list l (an internal node, never handed out).
#pragma once

#include <cassert>
#include <cstdint>
#include <optional>
#include <vector>

#include "kv/kv_types.h"

namespace drift {

class PageLists {
 public:
  PageLists(int32_t num_pages, int32_t num_lists);

  void push_back(int32_t list, PageId page);
  std::optional<PageId> pop_front(int32_t list);
  void remove(PageId page);  // from whichever list holds it

  std::optional<PageId> front(int32_t list) const;
  // The page after `page` in its list (nullopt at the end).
  std::optional<PageId> next(PageId page) const;
  int32_t size(int32_t list) const { return sizes_[list]; }
  bool linked(PageId page) const { return list_of_[page] >= 0; }
  std::optional<int32_t> list_of(PageId page) const;

  // Front to back; allocates (for tests and debugging).
  std::vector<PageId> to_vector(int32_t list) const;
  // Walks every list and checks links, membership and sizes. For tests.
  bool consistent() const;

 private:
  int32_t anchor(int32_t list) const { return num_pages_ + list; }

  int32_t num_pages_;
  std::vector<int32_t> prev_;     // [num_pages + num_lists]
  std::vector<int32_t> next_;     // [num_pages + num_lists]
  std::vector<int32_t> list_of_;  // [num_pages]: the list holding page i, -1 when in none
  std::vector<int32_t> sizes_;    // [num_lists]
};

}  // namespace drift
