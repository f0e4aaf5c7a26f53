// Overflow-checked arithmetic for sizes that come from files or requests. Every allocation or
// offset computed from untrusted numbers goes through these before use.
#pragma once

#include <cstdint>
#include <optional>

namespace drift {

inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// Rounds `value` up to a multiple of `alignment` (a power of two), or nullopt on overflow.
inline std::optional<uint64_t> checked_align_up(uint64_t value, uint64_t alignment) {
  auto bumped = checked_add(value, alignment - 1);
  if (!bumped) return std::nullopt;
  return *bumped & ~(alignment - 1);
}

inline bool is_power_of_two(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace drift
