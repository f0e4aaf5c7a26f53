// Memory for large, long-lived buffers that the kernels read in an order the TLB cannot follow
// (the KV cache: a decode step visits each sequence's pages through its page table).
#pragma once

#include <cstddef>

namespace drift {

// At least `bytes` bytes, aligned to 2 MiB and advised to be backed by transparent huge pages
// (where the kernel refuses, ordinary pages: the advice is a hint). nullptr when out of memory.
// Free with std::free.
void* allocate_huge_page_backed(size_t bytes);

}  // namespace drift
