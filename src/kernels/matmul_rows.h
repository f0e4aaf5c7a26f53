// Internal: the row-layout matmul loop every dot-product kernel shares — each (row, token) pair
// of MatmulArgs through one dot product. Internal linkage (see format.h), so each ISA's file
// instantiates it with its own dot products.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace drift::kernels {
namespace {

template <DotFn kDot>
void matmul_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  const auto* w = static_cast<const uint8_t*>(args.w);
  const auto* x = static_cast<const uint8_t*>(args.x);
  for (int64_t r = row_begin; r < row_end; ++r)
    for (int64_t t = 0; t < args.n_tokens; ++t)
      args.y[t * args.y_row_stride + r] =
          kDot(w + r * args.w_row_bytes, x + t * args.x_row_bytes, args.k);
}

}  // namespace
}  // namespace drift::kernels
