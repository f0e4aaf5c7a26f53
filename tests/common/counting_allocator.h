// A counting replacement of the global allocation functions, for the tests that prove a step
// allocates nothing. Include it in exactly one source file of a test binary: it defines
// operator new/delete for the whole program. Counting is on only while g_counting is set.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace {
std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocations{0};

// Hides `p` from the optimizer. A new-expression whose result never escapes may be elided (C++14
// [expr.new]/10): at -O1, GCC drops `delete new std::vector<int>(100)`'s outer allocation, so the
// allocator's self-tests make their pointers escape.
inline void escape(const void* p) { asm volatile("" : : "g"(p) : "memory"); }

void* counted_alloc(std::size_t size, std::size_t alignment = 0) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (size == 0) size = 1;
  void* p = nullptr;
  if (alignment > alignof(std::max_align_t)) {
    if (posix_memalign(&p, alignment, size) != 0) p = nullptr;
  } else {
    p = std::malloc(size);
  }
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t size) { return counted_alloc(size); }
void* operator new[](std::size_t size) { return counted_alloc(size); }
void* operator new(std::size_t size, std::align_val_t a) {
  return counted_alloc(size, std::size_t(a));
}
void* operator new[](std::size_t size, std::align_val_t a) {
  return counted_alloc(size, std::size_t(a));
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(size);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
