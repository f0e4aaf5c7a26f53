// Internal: software prefetch for the one-token (decode) panel kernels of every SIMD ISA.
//
// Decode streams each tile from memory once, and the hardware prefetcher alone leaves the core
// waiting on it: on the AVX2 3B decode the samples sat on the instructions right after the tile
// loads, and asking for the lines 4 KB ahead raised it from ~70% to ~90% of the measured read
// bandwidth (docs/design-notes.md, "Decode at the bandwidth wall"). Panels are back to back, so
// past a panel's end the lines ahead are the next panel's; a prefetch past the matrix is harmless
// (it never faults). Prefill does not need it: its chunk of panels is reused from L2.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace drift::kernels {
namespace {

inline constexpr int64_t kPrefetchBytes = 4096;

// Step `step` of `steps` over `tile` prefetches its share of the lines kPrefetchBytes beyond the
// tile's, so that a kernel spreads a tile's prefetches over its inner loop.
template <class Tile>
void prefetch_ahead(const Tile* tile, int step, int steps) {
  constexpr int64_t kBytes = sizeof(Tile);
  const auto first = reinterpret_cast<uintptr_t>(tile) + kPrefetchBytes;
  const uintptr_t begin = (first + kBytes * step / steps) & ~uintptr_t{63};
  const uintptr_t end = first + kBytes * (step + 1) / steps;
  for (uintptr_t line = begin; line < end; line += 64)
    _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
}

}  // namespace
}  // namespace drift::kernels
