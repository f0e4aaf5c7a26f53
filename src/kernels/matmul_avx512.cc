// AVX-512 (F/BW/VL/DQ + VNNI) matmul kernels, evaluating the canonical order of matmul.h.
//
// The 32-element formats hold two blocks per 512-bit register: lanes [0, 8) are block b's eight
// int32 lane sums (dpbusd), lanes [8, 16) block b + 1's, which is exactly the even/odd accumulator
// split of the canonical order. Signed weights go through dpbusd as |w| times the activation
// negated where w < 0 (activations are in [-127, 127], so the negation is exact). K-quants
// multiply 64 elements per instruction and fold the sub-block scales in with vpdpwssd. Tiles and
// the per-pair independence are as in matmul_avx2.cc.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/dispatch.h"
#include "kernels/lowbit_dispatch.h"
#include "kernels/matmul.h"
#include "kernels/matmul_tile.h"

namespace drift::kernels::avx512 {
namespace {

// reduce16 of matmul.h over the 16 lanes of one register.
float reduce16(__m512 acc) {
  const __m256 v = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
  const __m128 u = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 z = _mm_add_ps(u, _mm_movehl_ps(u, u));
  z = _mm_add_ss(z, _mm_movehdup_ps(z));
  return _mm_cvtss_f32(z);
}

__m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
__m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Two 256-bit halves as one register; the upper one zero unless kTwo.
template <bool kTwo>
__m512i join(__m256i lo, const void* hi) {
  const __m512i z = _mm512_zextsi256_si512(lo);
  if constexpr (kTwo) return _mm512_inserti64x4(z, load256(hi), 1);
  return z;
}

// ---- 32-element formats.

struct SignedPair {
  __m512i abs;
  __mmask64 negative;
};
struct UnsignedPair {
  __m512i q;
};

SignedPair make_signed(__m512i w) { return {_mm512_abs_epi8(w), _mm512_movepi8_mask(w)}; }

__m512i lanes(const SignedPair& w, __m512i a) {
  const __m512i a_signed = _mm512_mask_sub_epi8(a, w.negative, _mm512_setzero_si512(), a);
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.abs, a_signed);
}
__m512i lanes(const UnsignedPair& w, __m512i a) {
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.q, a);
}

// The nibbles of blocks b and b + 1 (zero if !kTwo) in element order: [b: 0..31, b+1: 0..31].
template <bool kTwo>
__m512i nibbles_pair(const uint8_t* qs0, const uint8_t* qs1) {
  __m256i t = _mm256_zextsi128_si256(load128(qs0));
  if constexpr (kTwo) t = _mm256_inserti128_si256(t, load128(qs1), 1);
  const __m512i z = _mm512_inserti64x4(_mm512_zextsi256_si512(t), _mm256_srli_epi16(t, 4), 1);
  // [lo0, lo1, hi0, hi1] -> [lo0, hi0, lo1, hi1]
  const __m512i ordered = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
  return _mm512_and_si512(ordered, _mm512_set1_epi8(15));
}

// The fifth bits of blocks b and b + 1 as 0x10 bytes in the same order.
template <bool kTwo>
__m512i high_bits_pair(const uint8_t* qh0, const uint8_t* qh1) {
  uint64_t bits = load_u32(qh0);
  if constexpr (kTwo) bits |= uint64_t{load_u32(qh1)} << 32;
  return _mm512_maskz_mov_epi8(bits, _mm512_set1_epi8(0x10));
}

// fp16 scale fields of blocks b and b + 1 (see matmul_avx2.cc): [d0, d1, 0, 0] or, with a min,
// [d0, m0, d1, m1].
template <bool kHasMin, bool kTwo>
__m128 scales_of(const uint8_t* block_b, int64_t block_bytes) {
  if constexpr (kHasMin) {
    __m128i v = _mm_cvtsi32_si128(static_cast<int32_t>(load_u32(block_b)));
    if constexpr (kTwo)
      v = _mm_insert_epi32(v, static_cast<int32_t>(load_u32(block_b + block_bytes)), 1);
    return _mm_cvtph_ps(v);
  } else {
    uint16_t d0, d1 = 0;
    std::memcpy(&d0, block_b, 2);
    if constexpr (kTwo) std::memcpy(&d1, block_b + block_bytes, 2);
    return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int32_t>(d0 | uint32_t{d1} << 16)));
  }
}

struct Q4_0 {
  using WBlock = BlockQ4_0;
  using ABlock = BlockQ8_0;
  template <bool kTwo>
  static SignedPair load(const WBlock* w) {
    const __m512i q = nibbles_pair<kTwo>(w[0].qs, w[1].qs);
    return make_signed(_mm512_sub_epi8(q, _mm512_set1_epi8(8)));
  }
};
struct Q5_0 {
  using WBlock = BlockQ5_0;
  using ABlock = BlockQ8_0;
  template <bool kTwo>
  static SignedPair load(const WBlock* w) {
    const __m512i q = _mm512_or_si512(nibbles_pair<kTwo>(w[0].qs, w[1].qs),
                                      high_bits_pair<kTwo>(w[0].qh, w[1].qh));
    return make_signed(_mm512_sub_epi8(q, _mm512_set1_epi8(16)));
  }
};
struct Q8_0 {
  using WBlock = BlockQ8_0;
  using ABlock = BlockQ8_0;
  template <bool kTwo>
  static SignedPair load(const WBlock* w) {
    return make_signed(join<kTwo>(load256(w[0].qs), w[1].qs));
  }
};
struct Q4_1 {
  using WBlock = BlockQ4_1;
  using ABlock = BlockQ8_1;
  template <bool kTwo>
  static UnsignedPair load(const WBlock* w) {
    return {nibbles_pair<kTwo>(w[0].qs, w[1].qs)};
  }
};
struct Q5_1 {
  using WBlock = BlockQ5_1;
  using ABlock = BlockQ8_1;
  template <bool kTwo>
  static UnsignedPair load(const WBlock* w) {
    return {_mm512_or_si512(nibbles_pair<kTwo>(w[0].qs, w[1].qs),
                            high_bits_pair<kTwo>(w[0].qh, w[1].qh))};
  }
};

template <class F>
struct Blocks32 {
  using WBlock = typename F::WBlock;
  using ABlock = typename F::ABlock;
  static constexpr bool kHasMin = std::is_same_v<ABlock, BlockQ8_1>;

  // Blocks b (even) and, if kTwo, b + 1. When !kTwo the upper lanes see zero quants and a zero
  // scale: fma(0, 0, acc) leaves acc unchanged (it is never -0).
  template <int R, int T, bool kTwo>
  static void step(const WBlock* const* w, const ABlock* const* a, int64_t b, __m512 (&acc)[R][T],
                   __m128 (&summ)[R][T]) {
    // [s_b x 8, s_b+1 x 8]: lane 1 (no min) or lane 2 (with min) of the scale products.
    const __m512i spread = _mm512_set_epi32(
        kHasMin ? 2 : 1, kHasMin ? 2 : 1, kHasMin ? 2 : 1, kHasMin ? 2 : 1, kHasMin ? 2 : 1,
        kHasMin ? 2 : 1, kHasMin ? 2 : 1, kHasMin ? 2 : 1, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512i av[T];
    __m128 ad[T];
    for (int t = 0; t < T; ++t) {
      av[t] = join<kTwo>(load256(a[t][b].qs), a[t][b + 1].qs);
      ad[t] = scales_of<kHasMin, kTwo>(reinterpret_cast<const uint8_t*>(a[t] + b), sizeof(ABlock));
    }
    for (int r = 0; r < R; ++r) {
      const __m128 wd =
          scales_of<kHasMin, kTwo>(reinterpret_cast<const uint8_t*>(w[r] + b), sizeof(WBlock));
      const auto wb = F::template load<kTwo>(w[r] + b);
      for (int t = 0; t < T; ++t) {
        const __m128 s = _mm_mul_ps(wd, ad[t]);
        if constexpr (kHasMin) summ[r][t] = _mm_fmadd_ps(wd, ad[t], summ[r][t]);
        const __m512 scale = _mm512_permutexvar_ps(spread, _mm512_zextps128_ps512(s));
        const __m512 p = _mm512_cvtepi32_ps(lanes(wb, av[t]));
        acc[r][t] = _mm512_fmadd_ps(scale, p, acc[r][t]);
      }
    }
  }

  template <int R, int T>
  static void run(const TileIo& io) {
    const WBlock* w[R];
    const ABlock* a[T];
    __m512 acc[R][T];
    __m128 summ[R][T];  // lane 1: summ[0], lane 3: summ[1]
    for (int r = 0; r < R; ++r) {
      w[r] = reinterpret_cast<const WBlock*>(io.w + r * io.w_stride);
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm512_setzero_ps();
        summ[r][t] = _mm_setzero_ps();
      }
    }
    for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const ABlock*>(io.x + t * io.x_stride);
    const int64_t nb = io.k / kQK;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) step<R, T, true>(w, a, b, acc, summ);
    if (b < nb) step<R, T, false>(w, a, b, acc, summ);
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) {
        float out = reduce16(acc[r][t]);
        if constexpr (kHasMin) {
          const __m128 m = summ[r][t];
          out = out + (_mm_cvtss_f32(_mm_movehdup_ps(m)) +
                       _mm_cvtss_f32(_mm_movehdup_ps(_mm_movehl_ps(m, m))));
        }
        io.y[t * io.y_stride + r] = out;
      }
  }
};

// ---- K-quants.

// Q4_K/Q5_K scales (int16 lanes [0, 8)) and mins (lanes [8, 16)) of a super-block.
__m256i scales_mins_k4(const uint8_t* scales) {
  uint32_t u[3];
  std::memcpy(u, scales, 12);
  const uint32_t s_lo = u[0] & 0x3f3f3f3fu;
  const uint32_t m_lo = u[1] & 0x3f3f3f3fu;
  const uint32_t s_hi = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
  const uint32_t m_hi = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
  const __m128i bytes = _mm_set_epi32(static_cast<int32_t>(m_hi), static_cast<int32_t>(m_lo),
                                      static_cast<int32_t>(s_hi), static_cast<int32_t>(s_lo));
  return _mm256_cvtepu8_epi16(bytes);
}

// int16 permutation indices spreading sub-block scales over the int16 lanes of maddubs results:
// K4[c] = [2c x 16, 2c+1 x 16] (Q4_K/Q5_K: the two sub-blocks of 64-element chunk c);
// Q6[g] = [4g x 8, 4g+1 x 8, 4g+2 x 8, 4g+3 x 8] (Q6_K: four sub-blocks of 16).
struct SpreadTables {
  alignas(64) int16_t k4[4][32];
  alignas(64) int16_t q6[4][32];
};
constexpr SpreadTables make_spread_tables() {
  SpreadTables t{};
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 32; ++i) {
      t.k4[j][i] = static_cast<int16_t>(2 * j + i / 16);
      t.q6[j][i] = static_cast<int16_t>(4 * j + i / 8);
    }
  return t;
}
constexpr SpreadTables kSpread = make_spread_tables();

// (s[0] + s[2]) + (s[1] + s[3]): reduce4 of matmul.h.
float reduce4_lanes(__m128 s) {
  __m128 z = _mm_add_ps(s, _mm_movehl_ps(s, s));
  z = _mm_add_ss(z, _mm_movehdup_ps(z));
  return _mm_cvtss_f32(z);
}

float reduce8(__m256 v) {
  return reduce4_lanes(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}

// The 8 canonical integer lanes from 16 (lanes l and l + 8 cover the same e % 32 range).
__m256i fold16(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

template <class WBlock>
struct Q45K {
  static constexpr bool kQ5 = std::is_same_v<WBlock, BlockQ5_K>;

  template <int R, int T>
  static void run(const TileIo& io) {
    const WBlock* w[R];
    const BlockQ8_K* a[T];
    __m256 acc[R][T];   // the 8 lanes of matmul.h
    __m128 summ[R][T];  // the 4 min lanes
    for (int r = 0; r < R; ++r) {
      w[r] = reinterpret_cast<const WBlock*>(io.w + r * io.w_stride);
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm256_setzero_ps();
        summ[r][t] = _mm_setzero_ps();
      }
    }
    for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const BlockQ8_K*>(io.x + t * io.x_stride);
    const __m512i m4 = _mm512_set1_epi8(15);
    for (int64_t b = 0; b < io.k / kQKK; ++b) {
      __m256i sm[R];
      __m512i isum[R][T][2];  // chunks 0, 2 and 1, 3: two dependency chains (exact integers)
      for (int r = 0; r < R; ++r) {
        sm[r] = scales_mins_k4(w[r][b].scales);
        for (int t = 0; t < T; ++t) isum[r][t][0] = isum[r][t][1] = _mm512_setzero_si512();
      }
      for (int c = 0; c < 4; ++c) {
        const __m512i idx = _mm512_load_si512(kSpread.k4[c]);
        for (int r = 0; r < R; ++r) {
          // Elements [64c, 64c + 64): low nibbles then high nibbles of 32 bytes.
          const __m256i bits = load256(w[r][b].qs + 32 * c);
          __m512i q = _mm512_and_si512(
              _mm512_inserti64x4(_mm512_zextsi256_si512(bits), _mm256_srli_epi16(bits, 4), 1), m4);
          if constexpr (kQ5) {
            // Bit 2c (first 32 elements) and 2c + 1 (next 32) of qh[l], l in [0, 32).
            const __m256i hb = load256(w[r][b].qh);
            const __m256i one = _mm256_set1_epi8(1);
            const __mmask32 lo = _mm256_test_epi8_mask(hb, _mm256_slli_epi16(one, 2 * c));
            const __mmask32 hi = _mm256_test_epi8_mask(hb, _mm256_slli_epi16(one, 2 * c + 1));
            const __mmask64 bits64 = uint64_t{lo} | uint64_t{hi} << 32;
            q = _mm512_or_si512(q, _mm512_maskz_mov_epi8(bits64, _mm512_set1_epi8(0x10)));
          }
          const __m512i scale = _mm512_permutexvar_epi16(idx, _mm512_zextsi256_si512(sm[r]));
          for (int t = 0; t < T; ++t) {
            const __m512i av = _mm512_loadu_si512(a[t][b].qs + 64 * c);
            isum[r][t][c % 2] =
                _mm512_dpwssd_epi32(isum[r][t][c % 2], _mm512_maddubs_epi16(q, av), scale);
          }
        }
      }
      for (int r = 0; r < R; ++r) {
        const __m128i mins = _mm256_extracti128_si256(sm[r], 1);
        const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int32_t>(load_u32(&w[r][b]))));
        for (int t = 0; t < T; ++t) {
          const __m256i bsums = load256(a[t][b].bsums);
          const __m128i pairs =
              _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
          const __m128 dd = _mm_mul_ps(dm, _mm_set1_ps(a[t][b].d));  // [d*da, dmin*da]
          const __m256i lanes8 = fold16(_mm512_add_epi32(isum[r][t][0], isum[r][t][1]));
          acc[r][t] =
              _mm256_fmadd_ps(_mm256_broadcastss_ps(dd), _mm256_cvtepi32_ps(lanes8), acc[r][t]);
          summ[r][t] = _mm_fmadd_ps(_mm_permute_ps(dd, 0x55),
                                    _mm_cvtepi32_ps(_mm_madd_epi16(pairs, mins)), summ[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t)
        io.y[t * io.y_stride + r] = reduce8(acc[r][t]) - reduce4_lanes(summ[r][t]);
  }
};

struct Q6K {
  template <int R, int T>
  static void run(const TileIo& io) {
    const BlockQ6_K* w[R];
    const BlockQ8_K* a[T];
    __m256 acc[R][T];  // the 8 lanes of matmul.h
    for (int r = 0; r < R; ++r) {
      w[r] = reinterpret_cast<const BlockQ6_K*>(io.w + r * io.w_stride);
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const BlockQ8_K*>(io.x + t * io.x_stride);
    const __m512i m15 = _mm512_set1_epi8(15);
    const __m512i m3 = _mm512_set1_epi8(3);
    for (int64_t b = 0; b < io.k / kQKK; ++b) {
      __m256i scales16[R];
      __m512i isum[R][T];
      for (int r = 0; r < R; ++r) {
        scales16[r] = _mm256_cvtepi8_epi16(load128(w[r][b].scales));
        for (int t = 0; t < T; ++t) isum[r][t] = _mm512_setzero_si512();
      }
      for (int h = 0; h < 2; ++h)
        for (int r = 0; r < R; ++r) {
          // Elements [128h, 128h + 64) and [128h + 64, 128h + 128) as unsigned 6-bit values.
          const __m512i ql = _mm512_loadu_si512(w[r][b].ql + 64 * h);
          const __m256i qh = load256(w[r][b].qh + 32 * h);
          // qh2 bytes: [qh | qh >> 2]: bits 0-1 feed elements l and 32 + l, bits 4-5 feed 64 + l
          // and 96 + l.
          const __m512i qh2 =
              _mm512_inserti64x4(_mm512_zextsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
          __m512i q[2];
          q[0] = _mm512_or_si512(_mm512_and_si512(ql, m15),
                                 _mm512_slli_epi16(_mm512_and_si512(qh2, m3), 4));
          q[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m15),
                                 _mm512_and_si512(qh2, _mm512_set1_epi8(48)));
          for (int g = 0; g < 2; ++g) {
            const __m512i scale = _mm512_permutexvar_epi16(_mm512_load_si512(kSpread.q6[2 * h + g]),
                                                           _mm512_zextsi256_si512(scales16[r]));
            for (int t = 0; t < T; ++t) {
              const __m512i av = _mm512_loadu_si512(a[t][b].qs + 128 * h + 64 * g);
              isum[r][t] = _mm512_dpwssd_epi32(isum[r][t], _mm512_maddubs_epi16(q[g], av), scale);
            }
          }
        }
      for (int r = 0; r < R; ++r) {
        const float d = _cvtsh_ss(w[r][b].d);
        for (int t = 0; t < T; ++t) {
          // The -32 of every quant: subtract 32 * sum_j scale[j] * bsums[j].
          const __m256i offset =
              _mm256_slli_epi32(_mm256_madd_epi16(scales16[r], load256(a[t][b].bsums)), 5);
          const __m256i lanes8 = _mm256_sub_epi32(fold16(isum[r][t]), offset);
          acc[r][t] =
              _mm256_fmadd_ps(_mm256_set1_ps(d * a[t][b].d), _mm256_cvtepi32_ps(lanes8), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) io.y[t * io.y_stride + r] = reduce8(acc[r][t]);
  }
};

// ---- Float formats: one register of 16 lanes per pair; the tail is a zero-filled masked load.

struct F32 {
  using Elem = float;
  static __m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct F16 {
  using Elem = uint16_t;
  static __m512 load16(const uint16_t* p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
};
struct BF16 {
  using Elem = uint16_t;
  static __m512 load16(const uint16_t* p, __mmask16 m) {
    const __m512i x = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
  }
};

template <class F>
struct Float {
  using Elem = typename F::Elem;

  template <int R, int T>
  static void run(const TileIo& io) {
    const Elem* w[R];
    const Elem* a[T];
    __m512 acc[R][T];
    for (int r = 0; r < R; ++r) {
      w[r] = reinterpret_cast<const Elem*>(io.w + r * io.w_stride);
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    }
    for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const Elem*>(io.x + t * io.x_stride);
    for (int64_t e = 0; e < io.k; e += 16) {
      const __mmask16 m =
          io.k - e >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << (io.k - e)) - 1);
      __m512 wv[R];
      for (int r = 0; r < R; ++r) wv[r] = F::load16(w[r] + e, m);
      for (int t = 0; t < T; ++t) {
        const __m512 av = F::load16(a[t] + e, m);
        for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], av, acc[r][t]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) io.y[t * io.y_stride + r] = reduce16(acc[r][t]);
  }
};

MatmulKernels make_kernels() {
  MatmulKernels t{};
  t.f32 = tiled_kernels<Float<F32>, 4, 4>();
  t.f16 = tiled_kernels<Float<F16>, 4, 4>();
  t.bf16 = tiled_kernels<Float<BF16>, 4, 4>();
  t.q4_0 = tiled_kernels<Blocks32<Q4_0>, 2, 4>();
  t.q4_1 = tiled_kernels<Blocks32<Q4_1>, 2, 4>();
  t.q5_0 = tiled_kernels<Blocks32<Q5_0>, 2, 4>();
  t.q5_1 = tiled_kernels<Blocks32<Q5_1>, 2, 4>();
  t.q8_0 = tiled_kernels<Blocks32<Q8_0>, 2, 4>();
  t.q4_k = tiled_kernels<Q45K<BlockQ4_K>, 1, 4>();
  t.q5_k = tiled_kernels<Q45K<BlockQ5_K>, 1, 4>();
  t.q6_k = tiled_kernels<Q6K, 2, 4>();
  add_lowbit_kernels(t);
  return t;
}

}  // namespace

const MatmulKernels& matmul_kernels() {
  static const MatmulKernels table = make_kernels();
  return table;
}

}  // namespace drift::kernels::avx512
