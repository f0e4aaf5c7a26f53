// AVX-512 (F/BW/VL/DQ + VNNI) matmul kernels. Placeholder: the AVX2 kernels.
#include <immintrin.h>

#include "kernels/dispatch.h"
#include "kernels/matmul.h"

namespace drift::kernels::avx512 {

const MatmulKernels& matmul_kernels() { return avx2::matmul_kernels(); }

}  // namespace drift::kernels::avx512
