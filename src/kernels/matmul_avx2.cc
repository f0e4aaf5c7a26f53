// AVX2 + FMA + F16C matmul kernels, evaluating the canonical order of matmul.h.
//
// Tiles of R rows x T tokens (matmul_tile.h): each weight block is unpacked once per tile and each
// activation block loaded once per tile, every (row, token) pair keeping its own accumulators.
// Integer products use maddubs (u8 x s8 -> pairs summed in int16, which cannot saturate here:
// |pair| <= 2 * 128 * 127) and madd. The 32-element formats step two blocks at a time so that the
// fp16 scales of both convert and multiply in one instruction.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/dispatch.h"
#include "kernels/lowbit_dispatch.h"
#include "kernels/matmul.h"
#include "kernels/matmul_tile.h"

namespace drift::kernels::avx2 {
namespace {

// reduce16 of matmul.h with lanes [0, 8) in acc0 and [8, 16) in acc1.
float reduce16(__m256 acc0, __m256 acc1) {
  const __m256 v = _mm256_add_ps(acc0, acc1);
  const __m128 u = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 z = _mm_add_ps(u, _mm_movehl_ps(u, u));
  z = _mm_add_ss(z, _mm_movehdup_ps(z));
  return _mm_cvtss_f32(z);
}

// (s[0] + s[2]) + (s[1] + s[3]): reduce4 of matmul.h, also the tail of reduce8 and reduce16.
float reduce4_lanes(__m128 s) {
  __m128 z = _mm_add_ps(s, _mm_movehl_ps(s, s));
  z = _mm_add_ss(z, _mm_movehdup_ps(z));
  return _mm_cvtss_f32(z);
}

__m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// 32 nibbles of 16 bytes in element order: low nibbles are elements [0, 16), high [16, 32).
__m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes);
  return _mm256_and_si256(both, _mm256_set1_epi8(15));
}

// Bit i of the 32-bit little-endian qh as 0x10 in byte i.
__m256i unpack_high_bits(const uint8_t* qh_bytes) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int32_t>(load_u32(qh_bytes))),
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
};
struct UnsignedBlock {
  __m256i q;
};

SignedBlock make_signed(__m256i w) { return {_mm256_sign_epi8(w, w), w}; }

__m256i lanes(const SignedBlock& w, const int8_t* a_qs) {
  const __m256i a = _mm256_sign_epi8(load256(a_qs), w.w);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w.abs, a), _mm256_set1_epi16(1));
}
__m256i lanes(const UnsignedBlock& w, const int8_t* a_qs) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w.q, load256(a_qs)), _mm256_set1_epi16(1));
}

// The fp16 scale fields of blocks b and b + 1 (only b if !kTwo), converted together:
// formats without a min: [d_b, d_b+1, 0, 0]; with a min (the first 4 bytes are d, m for weights
// and d, s for Q8_1 activations): [d_b, m_b, d_b+1, m_b+1].
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
  static SignedBlock load(const WBlock& b) {
    return make_signed(_mm256_sub_epi8(unpack_nibbles(b.qs), _mm256_set1_epi8(8)));
  }
};
struct Q5_0 {
  using WBlock = BlockQ5_0;
  using ABlock = BlockQ8_0;
  static SignedBlock load(const WBlock& b) {
    const __m256i q = _mm256_or_si256(unpack_nibbles(b.qs), unpack_high_bits(b.qh));
    return make_signed(_mm256_sub_epi8(q, _mm256_set1_epi8(16)));
  }
};
struct Q8_0 {
  using WBlock = BlockQ8_0;
  using ABlock = BlockQ8_0;
  static SignedBlock load(const WBlock& b) { return make_signed(load256(b.qs)); }
};
struct Q4_1 {
  using WBlock = BlockQ4_1;
  using ABlock = BlockQ8_1;
  static UnsignedBlock load(const WBlock& b) { return {unpack_nibbles(b.qs)}; }
};
struct Q5_1 {
  using WBlock = BlockQ5_1;
  using ABlock = BlockQ8_1;
  static UnsignedBlock load(const WBlock& b) {
    return {_mm256_or_si256(unpack_nibbles(b.qs), unpack_high_bits(b.qh))};
  }
};

template <class F>
struct Blocks32 {
  using WBlock = typename F::WBlock;
  using ABlock = typename F::ABlock;
  static constexpr bool kHasMin = std::is_same_v<ABlock, BlockQ8_1>;

  template <int R, int T>
  struct State {
    const WBlock* w[R];
    const ABlock* a[T];
    __m256 acc[R][T][2];  // lanes [0, 8) (even blocks) and [8, 16) (odd blocks) of matmul.h
    __m128 summ[R][T];    // lane 1: summ[0] (even blocks), lane 3: summ[1] (odd blocks)
  };

  // Blocks b (even) and, if kTwo, b + 1.
  template <int R, int T, bool kTwo>
  static void step(State<R, T>& st, int64_t b) {
    __m128 s[R][T];
    for (int r = 0; r < R; ++r) {
      const __m128 wd =
          scales_of<kHasMin, kTwo>(reinterpret_cast<const uint8_t*>(st.w[r] + b), sizeof(WBlock));
      for (int t = 0; t < T; ++t) {
        const __m128 ad =
            scales_of<kHasMin, kTwo>(reinterpret_cast<const uint8_t*>(st.a[t] + b), sizeof(ABlock));
        s[r][t] = _mm_mul_ps(wd, ad);
        if constexpr (kHasMin) st.summ[r][t] = _mm_fmadd_ps(wd, ad, st.summ[r][t]);
      }
    }
    for (int r = 0; r < R; ++r) {
      const auto wb = F::load(st.w[r][b]);
      for (int t = 0; t < T; ++t) {
        const __m256 p = _mm256_cvtepi32_ps(lanes(wb, st.a[t][b].qs));
        st.acc[r][t][0] = _mm256_fmadd_ps(_mm256_broadcastss_ps(s[r][t]), p, st.acc[r][t][0]);
      }
    }
    if constexpr (kTwo) {
      for (int r = 0; r < R; ++r) {
        const auto wb = F::load(st.w[r][b + 1]);
        for (int t = 0; t < T; ++t) {
          const __m256 p = _mm256_cvtepi32_ps(lanes(wb, st.a[t][b + 1].qs));
          const __m128 s1 = kHasMin ? _mm_movehl_ps(s[r][t], s[r][t]) : _mm_movehdup_ps(s[r][t]);
          st.acc[r][t][1] = _mm256_fmadd_ps(_mm256_broadcastss_ps(s1), p, st.acc[r][t][1]);
        }
      }
    }
  }

  template <int R, int T>
  static void run(const TileIo& io) {
    State<R, T> st;
    for (int r = 0; r < R; ++r) {
      st.w[r] = reinterpret_cast<const WBlock*>(io.w + r * io.w_stride);
      for (int t = 0; t < T; ++t) {
        st.acc[r][t][0] = st.acc[r][t][1] = _mm256_setzero_ps();
        st.summ[r][t] = _mm_setzero_ps();
      }
    }
    for (int t = 0; t < T; ++t) st.a[t] = reinterpret_cast<const ABlock*>(io.x + t * io.x_stride);
    const int64_t nb = io.k / kQK;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) step<R, T, true>(st, b);
    if (b < nb) step<R, T, false>(st, b);
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) {
        float out = reduce16(st.acc[r][t][0], st.acc[r][t][1]);
        if constexpr (kHasMin) {
          const __m128 m = st.summ[r][t];
          out = out + (_mm_cvtss_f32(_mm_movehdup_ps(m)) +
                       _mm_cvtss_f32(_mm_movehdup_ps(_mm_movehl_ps(m, m))));
        }
        io.y[t * io.y_stride + r] = out;
      }
  }
};

// ---- K-quants.

// Q4_K/Q5_K scales and mins of a super-block as 16 int16: lanes [0, 8) the 6-bit scales of the
// sub-blocks, lanes [8, 16) their mins (ggml's packing, see unpack_scale_min_k4).
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

// Broadcast int16 lane j (< 8) of each 128-bit half.
__m256i broadcast_i16_lane(__m256i v, int j) {
  return _mm256_shuffle_epi8(v, _mm256_set1_epi16(static_cast<int16_t>((2 * j + 1) << 8 | 2 * j)));
}

float reduce8(__m256 v) {
  const __m128 u = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  return reduce4_lanes(u);
}

// [d * da, dmin * da] from the fp16 pair at the start of a Q4_K/Q5_K block.
__m128 super_block_scales(const void* block, float da) {
  return _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int32_t>(load_u32(block)))),
                    _mm_set1_ps(da));
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
    const __m256i m4 = _mm256_set1_epi8(15);
    const __m256i one = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < io.k / kQKK; ++b) {
      __m256i sm[R], scales[R], isum[R][T];
      for (int r = 0; r < R; ++r) {
        sm[r] = scales_mins_k4(w[r][b].scales);
        scales[r] = _mm256_permute2x128_si256(sm[r], sm[r], 0x00);
        for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
      }
      for (int c = 0; c < 4; ++c) {
        for (int r = 0; r < R; ++r) {
          const __m256i bits = load256(w[r][b].qs + 32 * c);
          __m256i q_lo = _mm256_and_si256(bits, m4);
          __m256i q_hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
          if constexpr (kQ5) {
            const __m256i hbits = load256(w[r][b].qh);
            const __m256i h_lo = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c), one);
            const __m256i h_hi = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c + 1), one);
            q_lo = _mm256_or_si256(q_lo, _mm256_slli_epi16(h_lo, 4));
            q_hi = _mm256_or_si256(q_hi, _mm256_slli_epi16(h_hi, 4));
          }
          const __m256i scale_lo = broadcast_i16_lane(scales[r], 2 * c);
          const __m256i scale_hi = broadcast_i16_lane(scales[r], 2 * c + 1);
          for (int t = 0; t < T; ++t) {
            const int8_t* qa = a[t][b].qs + 64 * c;
            const __m256i p_lo =
                _mm256_madd_epi16(scale_lo, _mm256_maddubs_epi16(q_lo, load256(qa)));
            const __m256i p_hi =
                _mm256_madd_epi16(scale_hi, _mm256_maddubs_epi16(q_hi, load256(qa + 32)));
            isum[r][t] = _mm256_add_epi32(isum[r][t], _mm256_add_epi32(p_lo, p_hi));
          }
        }
      }
      for (int r = 0; r < R; ++r) {
        const __m128i mins = _mm256_extracti128_si256(sm[r], 1);
        for (int t = 0; t < T; ++t) {
          // msum = sum_j mins[j] * (bsums[2j] + bsums[2j+1]).
          const __m256i bsums = load256(a[t][b].bsums);
          const __m128i pairs =
              _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
          const __m128 dd = super_block_scales(&w[r][b], a[t][b].d);  // [d*da, dmin*da]
          acc[r][t] =
              _mm256_fmadd_ps(_mm256_broadcastss_ps(dd), _mm256_cvtepi32_ps(isum[r][t]), acc[r][t]);
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

// The four 32-element parts of half h of a Q6_K block as unsigned 6-bit values (the -32 is
// applied through the bsums).
void q6_half(const BlockQ6_K& blk, int h, __m256i* q) {
  const __m256i m15 = _mm256_set1_epi8(15);
  const __m256i ql0 = load256(blk.ql + 64 * h);
  const __m256i ql1 = load256(blk.ql + 64 * h + 32);
  const __m256i qh = load256(blk.qh + 32 * h);
  q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m15),
                         _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(3)), 4));
  q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m15),
                         _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(12)), 2));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m15),
                         _mm256_and_si256(qh, _mm256_set1_epi8(48)));
  q[3] = _mm256_or_si256(
      _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m15),
      _mm256_srli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(static_cast<char>(0xc0))), 2));
}

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
    for (int64_t b = 0; b < io.k / kQKK; ++b) {
      __m128i scales8[R];
      __m256i isum[R][T];
      for (int r = 0; r < R; ++r) {
        scales8[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[r][b].scales));
        for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
      }
      for (int h = 0; h < 2; ++h)
        for (int r = 0; r < R; ++r) {
          __m256i q[4];
          q6_half(w[r][b], h, q);
          for (int p = 0; p < 4; ++p) {
            const __m128i ctrl =
                _mm_load_si128(reinterpret_cast<const __m128i*>(kScalePairShuffle[4 * h + p]));
            const __m256i scale = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales8[r], ctrl));
            for (int t = 0; t < T; ++t) {
              const __m256i p16 =
                  _mm256_maddubs_epi16(q[p], load256(a[t][b].qs + 128 * h + 32 * p));
              isum[r][t] = _mm256_add_epi32(isum[r][t], _mm256_madd_epi16(scale, p16));
            }
          }
        }
      for (int r = 0; r < R; ++r) {
        const __m256i scales16 = _mm256_cvtepi8_epi16(scales8[r]);
        const float d = _cvtsh_ss(w[r][b].d);
        for (int t = 0; t < T; ++t) {
          // The -32 of every quant: subtract 32 * sum_j scale[j] * bsums[j].
          const __m256i offset =
              _mm256_slli_epi32(_mm256_madd_epi16(scales16, load256(a[t][b].bsums)), 5);
          acc[r][t] =
              _mm256_fmadd_ps(_mm256_set1_ps(d * a[t][b].d),
                              _mm256_cvtepi32_ps(_mm256_sub_epi32(isum[r][t], offset)), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) io.y[t * io.y_stride + r] = reduce8(acc[r][t]);
  }
};

// ---- Float formats: 16 lanes per pair (two registers), tail zero-padded (a no-op: acc is never
// -0, so adding +0 changes nothing).

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

template <class F>
struct Float {
  using Elem = typename F::Elem;

  template <int R, int T>
  static void accumulate(const Elem* const* w, const Elem* const* a, int64_t e,
                         __m256 (&acc)[R][T][2]) {
    for (int h = 0; h < 2; ++h) {
      __m256 wv[R];
      for (int r = 0; r < R; ++r) wv[r] = F::load8(w[r] + e + 8 * h);
      for (int t = 0; t < T; ++t) {
        const __m256 av = F::load8(a[t] + e + 8 * h);
        for (int r = 0; r < R; ++r) acc[r][t][h] = _mm256_fmadd_ps(wv[r], av, acc[r][t][h]);
      }
    }
  }

  template <int R, int T>
  static void run(const TileIo& io) {
    const Elem* w[R];
    const Elem* a[T];
    __m256 acc[R][T][2];
    for (int r = 0; r < R; ++r) {
      w[r] = reinterpret_cast<const Elem*>(io.w + r * io.w_stride);
      for (int t = 0; t < T; ++t) acc[r][t][0] = acc[r][t][1] = _mm256_setzero_ps();
    }
    for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const Elem*>(io.x + t * io.x_stride);
    int64_t e = 0;
    for (; e + 16 <= io.k; e += 16) accumulate<R, T>(w, a, e, acc);
    if (e < io.k) {
      const size_t tail = static_cast<size_t>(io.k - e) * sizeof(Elem);
      Elem wpad[R][16] = {}, apad[T][16] = {};
      const Elem* wp[R];
      const Elem* ap[T];
      for (int r = 0; r < R; ++r) {
        std::memcpy(wpad[r], w[r] + e, tail);
        wp[r] = wpad[r];
      }
      for (int t = 0; t < T; ++t) {
        std::memcpy(apad[t], a[t] + e, tail);
        ap[t] = apad[t];
      }
      accumulate<R, T>(wp, ap, 0, acc);
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) io.y[t * io.y_stride + r] = reduce16(acc[r][t][0], acc[r][t][1]);
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
  t.q6_k = tiled_kernels<Q6K, 1, 4>();
  add_lowbit_kernels(t);
  return t;
}

}  // namespace

const MatmulKernels& matmul_kernels() {
  static const MatmulKernels table = make_kernels();
  return table;
}

}  // namespace drift::kernels::avx2
