// AVX2 + FMA + F16C matmul kernels, evaluating the canonical order of matmul.h.
//
// Each kernel computes a tile of one weight row and T tokens (T = 1..4): a weight block is loaded
// and unpacked once and dotted with the T tokens' activation blocks, each token keeping its own
// accumulators, so a token's result does not depend on T. Integer products use maddubs (u8 x s8
// -> pairs of int16, which cannot saturate here: |pair| <= 2 * 128 * 127) and madd.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/dispatch.h"
#include "kernels/matmul.h"

namespace drift::kernels::avx2 {
namespace {

constexpr int kMaxTile = 4;

float h2f(uint16_t h) { return _cvtsh_ss(h); }

// reduce16 of matmul.h with lanes [0, 8) in acc0 and [8, 16) in acc1.
float reduce16(__m256 acc0, __m256 acc1) {
  const __m256 v = _mm256_add_ps(acc0, acc1);
  const __m128 u = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 z = _mm_add_ps(u, _mm_movehl_ps(u, u));
  z = _mm_add_ss(z, _mm_movehdup_ps(z));
  return _mm_cvtss_f32(z);
}

int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

__m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// 32 nibbles of 16 bytes in element order: low nibbles are elements [0, 16), high [16, 32).
__m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes);
  return _mm256_and_si256(both, _mm256_set1_epi8(15));
}

// Bit i of the 32-bit little-endian qh as 0x10 in byte i.
__m256i unpack_high_bits(const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof qh);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int32_t>(qh)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// ---- 32-element formats.
// A signed weight block (Q4_0, Q5_0, Q8_0) keeps |w| and w; a token's lanes are
// maddubs(|w|, sign(a, w)). An unsigned one (Q4_1, Q5_1) is multiplied directly.

struct SignedBlock {
  __m256i abs;
  __m256i w;
  float d;
};
struct UnsignedBlock {
  __m256i q;
  float d;
  float m;
};

SignedBlock make_signed(__m256i w, uint16_t d) { return {_mm256_sign_epi8(w, w), w, h2f(d)}; }

__m256i lanes(const SignedBlock& w, const int8_t* a_qs) {
  const __m256i a = _mm256_sign_epi8(load256(a_qs), w.w);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w.abs, a), _mm256_set1_epi16(1));
}
__m256i lanes(const UnsignedBlock& w, const int8_t* a_qs) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w.q, load256(a_qs)), _mm256_set1_epi16(1));
}

struct Q4_0 {
  using WBlock = BlockQ4_0;
  using ABlock = BlockQ8_0;
  static SignedBlock load(const WBlock& b) {
    return make_signed(_mm256_sub_epi8(unpack_nibbles(b.qs), _mm256_set1_epi8(8)), b.d);
  }
};
struct Q5_0 {
  using WBlock = BlockQ5_0;
  using ABlock = BlockQ8_0;
  static SignedBlock load(const WBlock& b) {
    const __m256i q = _mm256_or_si256(unpack_nibbles(b.qs), unpack_high_bits(b.qh));
    return make_signed(_mm256_sub_epi8(q, _mm256_set1_epi8(16)), b.d);
  }
};
struct Q8_0 {
  using WBlock = BlockQ8_0;
  using ABlock = BlockQ8_0;
  static SignedBlock load(const WBlock& b) { return make_signed(load256(b.qs), b.d); }
};
struct Q4_1 {
  using WBlock = BlockQ4_1;
  using ABlock = BlockQ8_1;
  static UnsignedBlock load(const WBlock& b) { return {unpack_nibbles(b.qs), h2f(b.d), h2f(b.m)}; }
};
struct Q5_1 {
  using WBlock = BlockQ5_1;
  using ABlock = BlockQ8_1;
  static UnsignedBlock load(const WBlock& b) {
    return {_mm256_or_si256(unpack_nibbles(b.qs), unpack_high_bits(b.qh)), h2f(b.d), h2f(b.m)};
  }
};

// One weight row x T tokens. x: T activation rows x_row_bytes apart; y[t * y_stride] = result.
template <class F, int T>
void tile_blocks32(const void* w_row, const uint8_t* x, int64_t x_row_bytes, int64_t k, float* y,
                   int64_t y_stride) {
  using ABlock = typename F::ABlock;
  constexpr bool kHasMin = std::is_same_v<ABlock, BlockQ8_1>;
  const auto* w = static_cast<const typename F::WBlock*>(w_row);
  const ABlock* a[T];
  for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const ABlock*>(x + t * x_row_bytes);
  __m256 acc[T][2];
  float summ[T];
  for (int t = 0; t < T; ++t) {
    acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    summ[t] = 0.0f;
  }
  const int64_t nb = k / kQK;
  auto step = [&](int64_t b, int parity) __attribute__((always_inline)) {
    const auto wb = F::load(w[b]);
    for (int t = 0; t < T; ++t) {
      const __m256i p = lanes(wb, a[t][b].qs);
      const __m256 s = _mm256_set1_ps(wb.d * h2f(a[t][b].d));
      acc[t][parity] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(p), acc[t][parity]);
      if constexpr (kHasMin) summ[t] = std::fma(wb.m, h2f(a[t][b].s), summ[t]);
    }
  };
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    step(b, 0);
    step(b + 1, 1);
  }
  if (b < nb) step(b, 0);
  for (int t = 0; t < T; ++t) {
    const float r = reduce16(acc[t][0], acc[t][1]);
    y[t * y_stride] = kHasMin ? r + summ[t] : r;
  }
}

// ---- K-quants.

// Q4_K/Q5_K scales and mins of a super-block as bytes sc[0..8), mn[0..8) (ggml's packing).
void unpack_scales_k4(const uint8_t* scales, uint8_t* sc, uint8_t* mn) {
  uint32_t u[3];
  std::memcpy(u, scales, 12);
  const uint32_t s_lo = u[0] & 0x3f3f3f3fu;
  const uint32_t m_lo = u[1] & 0x3f3f3f3fu;
  const uint32_t s_hi = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
  const uint32_t m_hi = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
  std::memcpy(sc, &s_lo, 4);
  std::memcpy(sc + 4, &s_hi, 4);
  std::memcpy(mn, &m_lo, 4);
  std::memcpy(mn + 4, &m_hi, 4);
}

// sum over sub-blocks j of mn[j] * (bsums[2j] + bsums[2j+1]).
int32_t min_sum(const uint8_t* mn, const int16_t* bsums) {
  const __m256i b = load256(bsums);
  const __m128i pairs = _mm_hadd_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
  const __m128i mins = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn)));
  __m128i s = _mm_madd_epi16(pairs, mins);
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

template <class WBlock, int T>
void tile_q45_k(const void* w_row, const uint8_t* x, int64_t x_row_bytes, int64_t k, float* y,
                int64_t y_stride) {
  constexpr bool kQ5 = std::is_same_v<WBlock, BlockQ5_K>;
  const auto* w = static_cast<const WBlock*>(w_row);
  const BlockQ8_K* a[T];
  for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const BlockQ8_K*>(x + t * x_row_bytes);
  float sumf[T], summ[T];
  for (int t = 0; t < T; ++t) sumf[t] = summ[t] = 0.0f;
  const __m256i m4 = _mm256_set1_epi8(15);
  const __m256i one = _mm256_set1_epi8(1);
  for (int64_t b = 0; b < k / kQKK; ++b) {
    uint8_t sc[8], mn[8];
    unpack_scales_k4(w[b].scales, sc, mn);
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    __m256i hbits;
    if constexpr (kQ5) hbits = load256(w[b].qh);
    for (int c = 0; c < 4; ++c) {
      const __m256i bits = load256(w[b].qs + 32 * c);
      __m256i q_lo = _mm256_and_si256(bits, m4);
      __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
      if constexpr (kQ5) {
        const __m256i h_lo = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c), one);
        const __m256i h_hi = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c + 1), one);
        q_lo = _mm256_or_si256(q_lo, _mm256_slli_epi16(h_lo, 4));
        q_hi = _mm256_or_si256(q_hi, _mm256_slli_epi16(h_hi, 4));
      }
      const __m256i scale_lo = _mm256_set1_epi16(sc[2 * c]);
      const __m256i scale_hi = _mm256_set1_epi16(sc[2 * c + 1]);
      for (int t = 0; t < T; ++t) {
        const int8_t* qa = a[t][b].qs + 64 * c;
        const __m256i p_lo = _mm256_madd_epi16(scale_lo, _mm256_maddubs_epi16(q_lo, load256(qa)));
        const __m256i p_hi =
            _mm256_madd_epi16(scale_hi, _mm256_maddubs_epi16(q_hi, load256(qa + 32)));
        isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(p_lo, p_hi));
      }
    }
    const float d = h2f(w[b].d);
    const float dmin = h2f(w[b].dmin);
    for (int t = 0; t < T; ++t) {
      const int32_t msum = min_sum(mn, a[t][b].bsums);
      sumf[t] = std::fma(d * a[t][b].d, static_cast<float>(hsum_i32(isum[t])), sumf[t]);
      summ[t] = std::fma(dmin * a[t][b].d, static_cast<float>(msum), summ[t]);
    }
  }
  for (int t = 0; t < T; ++t) y[t * y_stride] = sumf[t] - summ[t];
}

// Byte shuffles picking Q6_K scale pair j: [2j x 8, 2j+1 x 8].
alignas(16) constexpr uint8_t kScalePairShuffle[8][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},
    {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9},
    {10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13},
    {14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15},
};

template <int T>
void tile_q6_k(const void* w_row, const uint8_t* x, int64_t x_row_bytes, int64_t k, float* y,
               int64_t y_stride) {
  const auto* w = static_cast<const BlockQ6_K*>(w_row);
  const BlockQ8_K* a[T];
  for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const BlockQ8_K*>(x + t * x_row_bytes);
  float sumf[T];
  for (int t = 0; t < T; ++t) sumf[t] = 0.0f;
  const __m256i m15 = _mm256_set1_epi8(15);
  for (int64_t b = 0; b < k / kQKK; ++b) {
    const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load256(w[b].ql + 64 * h);
      const __m256i ql1 = load256(w[b].ql + 64 * h + 32);
      const __m256i qh = load256(w[b].qh + 32 * h);
      // The four 32-element parts of this half, as unsigned 6-bit values (the -32 comes later).
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m15),
                             _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(3)), 4));
      q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m15),
                             _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(12)), 2));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m15),
                             _mm256_and_si256(qh, _mm256_set1_epi8(48)));
      q[3] = _mm256_or_si256(
          _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m15),
          _mm256_srli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(static_cast<char>(0xc0))), 2));
      __m256i scale[4];
      for (int p = 0; p < 4; ++p) {
        const __m128i ctrl =
            _mm_load_si128(reinterpret_cast<const __m128i*>(kScalePairShuffle[4 * h + p]));
        scale[p] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales8, ctrl));
      }
      for (int t = 0; t < T; ++t) {
        const int8_t* qa = a[t][b].qs + 128 * h;
        for (int p = 0; p < 4; ++p) {
          const __m256i p16 = _mm256_maddubs_epi16(q[p], load256(qa + 32 * p));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(scale[p], p16));
        }
      }
    }
    // The -32 offset: sum_j scale[j] * 32 * bsums[j].
    const __m256i scales16 = _mm256_cvtepi8_epi16(scales8);
    const float d = h2f(w[b].d);
    for (int t = 0; t < T; ++t) {
      const __m256i offset =
          _mm256_slli_epi32(_mm256_madd_epi16(scales16, load256(a[t][b].bsums)), 5);
      const int32_t total = hsum_i32(_mm256_sub_epi32(isum[t], offset));
      sumf[t] = std::fma(d * a[t][b].d, static_cast<float>(total), sumf[t]);
    }
  }
  for (int t = 0; t < T; ++t) y[t * y_stride] = sumf[t];
}

// ---- Float formats: 16 lanes per token (two registers), tail zero-padded (a no-op: acc is
// never -0, so adding +0 changes nothing).

struct F32 {
  using Elem = float;
  static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
};
struct F16 {
  using Elem = uint16_t;
  static __m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};
struct BF16 {
  using Elem = uint16_t;
  static __m256 load8(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
};

template <class F, int T>
void tile_float(const void* w_row, const uint8_t* x, int64_t x_row_bytes, int64_t k, float* y,
                int64_t y_stride) {
  using Elem = typename F::Elem;
  const auto* w = static_cast<const Elem*>(w_row);
  const Elem* a[T];
  for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const Elem*>(x + t * x_row_bytes);
  __m256 acc[T][2];
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  int64_t e = 0;
  for (; e + 16 <= k; e += 16) {
    const __m256 w0 = F::load8(w + e);
    const __m256 w1 = F::load8(w + e + 8);
    for (int t = 0; t < T; ++t) {
      acc[t][0] = _mm256_fmadd_ps(w0, F::load8(a[t] + e), acc[t][0]);
      acc[t][1] = _mm256_fmadd_ps(w1, F::load8(a[t] + e + 8), acc[t][1]);
    }
  }
  if (e < k) {
    Elem wpad[16] = {}, apad[16] = {};
    std::memcpy(wpad, w + e, static_cast<size_t>(k - e) * sizeof(Elem));
    const __m256 w0 = F::load8(wpad);
    const __m256 w1 = F::load8(wpad + 8);
    for (int t = 0; t < T; ++t) {
      std::memcpy(apad, a[t] + e, static_cast<size_t>(k - e) * sizeof(Elem));
      acc[t][0] = _mm256_fmadd_ps(w0, F::load8(apad), acc[t][0]);
      acc[t][1] = _mm256_fmadd_ps(w1, F::load8(apad + 8), acc[t][1]);
    }
  }
  for (int t = 0; t < T; ++t) y[t * y_stride] = reduce16(acc[t][0], acc[t][1]);
}

// ---- The row loop: tiles of kMaxTile tokens, then the remainder.

template <template <int> class Tile>
void matmul_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  const auto* w = static_cast<const uint8_t*>(args.w);
  const auto* x = static_cast<const uint8_t*>(args.x);
  const int64_t n = args.n_tokens;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* w_row = w + r * args.w_row_bytes;
    float* y = args.y + r;
    int64_t t = 0;
    for (; t + kMaxTile <= n; t += kMaxTile)
      Tile<kMaxTile>::run(w_row, x + t * args.x_row_bytes, args.x_row_bytes, args.k,
                          y + t * args.y_row_stride, args.y_row_stride);
    const uint8_t* xt = x + t * args.x_row_bytes;
    float* yt = y + t * args.y_row_stride;
    switch (n - t) {
      case 3:
        Tile<3>::run(w_row, xt, args.x_row_bytes, args.k, yt, args.y_row_stride);
        break;
      case 2:
        Tile<2>::run(w_row, xt, args.x_row_bytes, args.k, yt, args.y_row_stride);
        break;
      case 1:
        Tile<1>::run(w_row, xt, args.x_row_bytes, args.k, yt, args.y_row_stride);
        break;
      default:
        break;
    }
  }
}

template <template <int> class Tile>
float dot(const void* w_row, const void* x_row, int64_t k) {
  float out;
  Tile<1>::run(w_row, static_cast<const uint8_t*>(x_row), 0, k, &out, 0);
  return out;
}

template <template <int> class Tile>
FormatKernels kernels() {
  return FormatKernels{dot<Tile>, matmul_rows<Tile>};
}

template <class F>
struct Blocks32 {
  template <int T>
  struct Tile {
    static void run(const void* w, const uint8_t* x, int64_t xs, int64_t k, float* y, int64_t ys) {
      tile_blocks32<F, T>(w, x, xs, k, y, ys);
    }
  };
};
template <class WBlock>
struct Q45K {
  template <int T>
  struct Tile {
    static void run(const void* w, const uint8_t* x, int64_t xs, int64_t k, float* y, int64_t ys) {
      tile_q45_k<WBlock, T>(w, x, xs, k, y, ys);
    }
  };
};
template <int T>
struct Q6KTile {
  static void run(const void* w, const uint8_t* x, int64_t xs, int64_t k, float* y, int64_t ys) {
    tile_q6_k<T>(w, x, xs, k, y, ys);
  }
};
template <class F>
struct Float {
  template <int T>
  struct Tile {
    static void run(const void* w, const uint8_t* x, int64_t xs, int64_t k, float* y, int64_t ys) {
      tile_float<F, T>(w, x, xs, k, y, ys);
    }
  };
};

MatmulKernels make_kernels() {
  MatmulKernels t{};
  t.f32 = kernels<Float<F32>::Tile>();
  t.f16 = kernels<Float<F16>::Tile>();
  t.bf16 = kernels<Float<BF16>::Tile>();
  t.q4_0 = kernels<Blocks32<Q4_0>::Tile>();
  t.q4_1 = kernels<Blocks32<Q4_1>::Tile>();
  t.q5_0 = kernels<Blocks32<Q5_0>::Tile>();
  t.q5_1 = kernels<Blocks32<Q5_1>::Tile>();
  t.q8_0 = kernels<Blocks32<Q8_0>::Tile>();
  t.q4_k = kernels<Q45K<BlockQ4_K>::Tile>();
  t.q5_k = kernels<Q45K<BlockQ5_K>::Tile>();
  t.q6_k = kernels<Q6KTile>();
  return t;
}

}  // namespace

const MatmulKernels& matmul_kernels() {
  static const MatmulKernels table = make_kernels();
  return table;
}

}  // namespace drift::kernels::avx2
