// AVX-512 VNNI kernels of the low-bit formats: lowbit_simd.h with vpdpbusd products (four u8 x s8
// products straight into int32), then the sub-block scale as an int32 multiply.
#include "kernels/lowbit_dispatch.h"
#include "kernels/lowbit_simd.h"

namespace drift::kernels::avx512 {
namespace {

struct DpbusdProducts {
  static __m256i scaled(__m256i u, __m256i a, int s0, int s1) {
    const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, a);
    if (s0 == 1 && s1 == 1) return p;
    return _mm256_mullo_epi32(p, _mm256_set_m128i(_mm_set1_epi32(s1), _mm_set1_epi32(s0)));
  }
};

}  // namespace

void add_lowbit_kernels(MatmulKernels& table) { add_lowbit_kernels_with<DpbusdProducts>(table); }

}  // namespace drift::kernels::avx512
