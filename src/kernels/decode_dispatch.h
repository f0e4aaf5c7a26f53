// Internal: the compile-time instance of a decode attention step for a block's KV format and
// query count, shared by the AVX2 and AVX-512 attention files (internal linkage: format.h's note).
#pragma once

#include <cstdint>

#include "kernels/kv_format.h"

namespace drift::kernels {
namespace {

// Calls fn.template operator()<F, N>() for the format and the block's query count (1 to 8).
template <class Fn>
void with_format_and_count(KvFormat format, int64_t n, Fn fn) {
  auto count = [&]<KvFormat F>() {
    switch (n) {
      case 1:
        return fn.template operator()<F, 1>();
      case 2:
        return fn.template operator()<F, 2>();
      case 3:
        return fn.template operator()<F, 3>();
      case 4:
        return fn.template operator()<F, 4>();
      case 5:
        return fn.template operator()<F, 5>();
      case 6:
        return fn.template operator()<F, 6>();
      case 7:
        return fn.template operator()<F, 7>();
      default:
        return fn.template operator()<F, 8>();
    }
  };
  switch (format) {
    case KvFormat::kF16:
      return count.template operator()<KvFormat::kF16>();
    case KvFormat::kBF16:
      return count.template operator()<KvFormat::kBF16>();
    case KvFormat::kF32:
      return count.template operator()<KvFormat::kF32>();
    case KvFormat::kInt8:
      return count.template operator()<KvFormat::kInt8>();
    case KvFormat::kInt4:
      return count.template operator()<KvFormat::kInt4>();
  }
}

}  // namespace
}  // namespace drift::kernels
