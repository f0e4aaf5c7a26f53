// Greedy decoding's choice over one row of logits: the index of the largest value, the first one
// on ties. NaN values are never chosen (a row with no other value gives 0).
//
// Why a kernel: the scalar loop is one compare-and-select chain over the vocabulary (~2 cycles
// per logit); with 64 sequences decoding, 64 rows of 49k logits per step cost as much as a
// layer's attention. Eight lanes each keep their first maximum, reduced by value then index.
#pragma once

#include <cstdint>

#include "util/cpu_features.h"

namespace drift::kernels {

// x: [n], n >= 1.
int32_t argmax(Isa isa, const float* x, int64_t n);

}  // namespace drift::kernels
