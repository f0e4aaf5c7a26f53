// Memory for large, long-lived buffers that the kernels stream through or visit in an order the
// TLB cannot follow: the KV cache (a decode step visits each sequence's pages through its page
// table) and the repacked weights (read once per step, ~100 MB and more).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace drift {

// At least `bytes` bytes, aligned to 2 MiB and advised to be backed by transparent huge pages
// (where the kernel refuses, ordinary pages: the advice is a hint). nullptr when out of memory.
// Free with std::free.
void* allocate_huge_page_backed(size_t bytes);

// Bump allocation from huge-page-backed chunks, so that many medium buffers (a model's matrices,
// most far below 2 MiB) share huge pages instead of each being mapped with 4 KiB pages. Buffers
// live as long as the arena; moving the arena keeps them where they are.
class HugePageArena {
 public:
  explicit HugePageArena(size_t chunk_bytes = size_t{64} << 20) : chunk_bytes_(chunk_bytes) {}

  // `bytes` bytes aligned to 64; nullptr when out of memory. A buffer larger than a chunk gets
  // a chunk of its own.
  uint8_t* allocate(size_t bytes);

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::vector<std::unique_ptr<void, Free>> chunks_;
  size_t chunk_bytes_;
  uint8_t* next_ = nullptr;
  size_t left_ = 0;
};

}  // namespace drift
