// AVX2 kernels of the low-bit formats: lowbit_simd.h with vpmaddubsw + vpmaddwd products (pairs
// in int16 cannot saturate: |u| <= 127 and |a| <= 127, so a pair is at most 32258).
#include "kernels/lowbit_dispatch.h"
#include "kernels/lowbit_simd.h"

namespace drift::kernels::avx2 {
namespace {

struct MaddProducts {
  static __m256i scaled(__m256i u, __m256i a, int s0, int s1) {
    const __m256i scale = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(s1)),
                                           _mm_set1_epi16(static_cast<int16_t>(s0)));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), scale);
  }
};

}  // namespace

void add_lowbit_kernels(MatmulKernels& table) { add_lowbit_kernels_with<MaddProducts>(table); }

}  // namespace drift::kernels::avx2
