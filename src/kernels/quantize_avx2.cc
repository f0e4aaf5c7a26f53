// Activation quantizers with AVX2; bytes identical to the scalar references in quantize.cc.
#include <immintrin.h>

#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/fp16.h"

namespace drift::kernels::avx2 {
namespace {

float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// roundf: half away from zero, exactly. trunc(v) + (|v - trunc(v)| >= 0.5 ? sign(v) : 0);
// v - trunc(v) is exact.
__m256 round_half_away(__m256 v) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_andnot_ps(sign_bit, _mm256_sub_ps(v, t));
  const __m256 up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, sign_bit));
  return _mm256_add_ps(t, _mm256_and_ps(up, one));
}

// Packs 4 x 8 int32 (each in [-127, 127]) into 32 int8 in order.
__m256i pack_i32_to_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b);  // a0-3 b0-3 a4-7 b4-7
  const __m256i cd = _mm256_packs_epi32(c, d);
  const __m256i abcd = _mm256_packs_epi16(ab, cd);  // a0-3 b0-3 c0-3 d0-3 a4-7 b4-7 c4-7 d4-7
  return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Quantizes one block of 32 like the reference Q8_0/Q8_1: returns d, writes qs, adds sum(q).
float quantize_block_32(const float* x, int8_t* qs, int* sum) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm256_loadu_ps(x + 8 * j);
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_bit, v[j]));
  }
  const float d = hmax(amax) / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const __m256 mul = _mm256_set1_ps(id);
  __m256i q[4];
  for (int j = 0; j < 4; ++j) q[j] = _mm256_cvtps_epi32(round_half_away(_mm256_mul_ps(v[j], mul)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), pack_i32_to_i8(q[0], q[1], q[2], q[3]));
  if (sum != nullptr) {
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
    *sum = _mm_cvtsi128_si32(s4);
  }
  return d;
}

// f32_to_fp16 (fp16.h) by F16C, whose rounding that definition copies: one instruction for the
// scalar code's integer steps and branches, twice per block of 32.
uint16_t to_fp16(float x) {
  return static_cast<uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

}  // namespace

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i, x += kQK)
    y[i].d = to_fp16(quantize_block_32(x, y[i].qs, nullptr));
}

void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t k) {
  for (int64_t i = 0; i < k / kQK; ++i, x += kQK) {
    int sum = 0;
    const float d = quantize_block_32(x, y[i].qs, &sum);
    y[i].d = to_fp16(d);
    y[i].s = to_fp16(static_cast<float>(sum) * d);
  }
}

void quantize_row_q8_K(const float* x, BlockQ8_K* y, int64_t k) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i < k / kQKK; ++i, x += kQKK) {
    __m256 amax_v = _mm256_setzero_ps();
    for (int j = 0; j < kQKK; j += 8)
      amax_v = _mm256_max_ps(amax_v, _mm256_andnot_ps(sign_bit, _mm256_loadu_ps(x + j)));
    const float amax = hmax(amax_v);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    // The reference keeps the first element of largest magnitude (its sign matters).
    const __m256 target = _mm256_set1_ps(amax);
    float max = 0.0f;
    for (int j = 0; j < kQKK; j += 8) {
      const __m256 a = _mm256_andnot_ps(sign_bit, _mm256_loadu_ps(x + j));
      const int hits = _mm256_movemask_ps(_mm256_cmp_ps(a, target, _CMP_EQ_OQ));
      if (hits != 0) {
        max = x[j + __builtin_ctz(static_cast<unsigned>(hits))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 mul = _mm256_set1_ps(iscale);
    const __m256i limit = _mm256_set1_epi32(127);
    for (int j = 0; j < kQKK; j += 32) {
      __m256i q[4];
      for (int h = 0; h < 4; ++h) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * h), mul);
        q[h] = _mm256_min_epi32(
            _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)),
            limit);
      }
      const __m256i packed = pack_i32_to_i8(q[0], q[1], q[2], q[3]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + j), packed);
      // bsums of the two groups of 16: widen to int16 and add pairwise down to one per group.
      const __m256i w16_lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(packed));
      const __m256i w16_hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(packed, 1));
      const __m256i ones = _mm256_set1_epi16(1);
      for (int g = 0; g < 2; ++g) {
        const __m256i s32 = _mm256_madd_epi16(g == 0 ? w16_lo : w16_hi, ones);
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
        s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
        y[i].bsums[j / 16 + g] = static_cast<int16_t>(_mm_cvtsi128_si32(s4));
      }
    }
    y[i].d = 1.0f / iscale;
  }
}

}  // namespace drift::kernels::avx2
