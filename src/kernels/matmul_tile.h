// Internal: the row/token tiling shared by the SIMD matmul files.
//
// A kernel computes a tile of R weight rows x T tokens; the matmul loop covers [row_begin,
// row_end) x [0, n_tokens) with tiles. Within a tile every (row, token) pair keeps its own
// accumulators and performs the single-pair operation sequence, so the tile shape never changes a
// result: it only decides how often a weight block or an activation block is loaded and unpacked.
// Everything here has internal linkage (see the note in format.h).
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace drift::kernels {
namespace {

struct TileIo {
  const uint8_t* w;  // R weight rows, w_stride bytes apart
  int64_t w_stride;
  const uint8_t* x;  // T activation rows, x_stride bytes apart
  int64_t x_stride;
  float* y;  // y[t * y_stride + r]
  int64_t y_stride;
  int64_t k;
};

// A tile of one row and `count` < kMax tokens.
template <class Kernel, int kMax>
void run_partial(const TileIo& io, int64_t count) {
  if constexpr (kMax > 1) {
    if (count == kMax - 1) return Kernel::template run<1, kMax - 1>(io);
    run_partial<Kernel, kMax - 1>(io, count);
  }
}

// Kernel::run<R, T>(io) computes one tile. Decode (one token) uses tiles of kDecodeRows rows;
// batches use one row and kBatchTokens tokens at a time, remainders smaller tiles.
template <class Kernel, int kDecodeRows, int kBatchTokens>
void matmul_tiled(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  const auto* w = static_cast<const uint8_t*>(args.w);
  const auto* x = static_cast<const uint8_t*>(args.x);
  TileIo io{nullptr, args.w_row_bytes,  nullptr, args.x_row_bytes,
            nullptr, args.y_row_stride, args.k};
  const int64_t n = args.n_tokens;
  if (n == 1) {
    io.x = x;
    int64_t r = row_begin;
    for (; r + kDecodeRows <= row_end; r += kDecodeRows) {
      io.w = w + r * args.w_row_bytes;
      io.y = args.y + r;
      Kernel::template run<kDecodeRows, 1>(io);
    }
    for (; r < row_end; ++r) {
      io.w = w + r * args.w_row_bytes;
      io.y = args.y + r;
      Kernel::template run<1, 1>(io);
    }
    return;
  }
  for (int64_t r = row_begin; r < row_end; ++r) {
    io.w = w + r * args.w_row_bytes;
    int64_t t = 0;
    for (; t + kBatchTokens <= n; t += kBatchTokens) {
      io.x = x + t * args.x_row_bytes;
      io.y = args.y + t * args.y_row_stride + r;
      Kernel::template run<1, kBatchTokens>(io);
    }
    io.x = x + t * args.x_row_bytes;
    io.y = args.y + t * args.y_row_stride + r;
    run_partial<Kernel, kBatchTokens>(io, n - t);
  }
}

template <class Kernel>
float dot_one(const void* w_row, const void* x_row, int64_t k) {
  float out;
  const TileIo io{
      static_cast<const uint8_t*>(w_row), 0, static_cast<const uint8_t*>(x_row), 0, &out, 0, k};
  Kernel::template run<1, 1>(io);
  return out;
}

template <class Kernel, int kDecodeRows, int kBatchTokens>
FormatKernels tiled_kernels() {
  return FormatKernels{dot_one<Kernel>, matmul_tiled<Kernel, kDecodeRows, kBatchTokens>};
}

}  // namespace
}  // namespace drift::kernels
