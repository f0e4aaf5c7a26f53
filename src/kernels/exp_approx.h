// exp for softmax and SiLU: one definition evaluated identically by the scalar and SIMD paths.
//
// libm's expf is not available in SIMD and llama.cpp's vectorised exp differs from its scalar one,
// so drift defines its own: Cody-Waite reduction x = n ln2 + r (|r| <= ln2/2, n by round to
// nearest even), a degree-6 polynomial for e^r evaluated by Horner with fused multiply-adds, and
// 2^n applied as two exact power-of-two factors so that subnormal results round once (the same
// single rounding as AVX-512's vscalefps, which that path uses). x is clamped to [-104, 104] first
// (e^-104 rounds to 0, e^104 overflows to inf); NaN stays NaN. Relative error below 4 ulp wherever
// the result is a normal float (tested).
//
// Why fused: every step is one fma instead of a multiply and an add, and each rounds once: the
// exponentials of attention (one per query and position) cost 18% of prefill attention at 1K
// context with separate operations. Every x86-64 CPU with AVX2 has FMA; the scalar path
// (std::fma) is the reference the SIMD paths are tested against bit for bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace drift::kernels {

// Constants shared with the SIMD versions.
inline constexpr float kExpLo = -104.0f;
inline constexpr float kExpHi = 104.0f;
inline constexpr float kExpLog2e = 1.44269504088896341f;
inline constexpr float kExpLn2Hi = 0.693359375f;  // 9 significant bits: n * kExpLn2Hi is exact
inline constexpr float kExpLn2Lo = -2.12194440e-4f;
inline constexpr float kExpRound = 12582912.0f;  // 1.5 * 2^23: (t + it) - it rounds t to an integer
// e^r ~ 1 + r + r^2 (c0 + r (c1 + r (c2 + r (c3 + r (c4 + r c5))))) on [-ln2/2, ln2/2]
// (Cephes' minimax coefficients for expf).
inline constexpr float kExpC0 = 5.0000001201e-1f;
inline constexpr float kExpC1 = 1.6666665459e-1f;
inline constexpr float kExpC2 = 4.1665795894e-2f;
inline constexpr float kExpC3 = 8.3334519073e-3f;
inline constexpr float kExpC4 = 1.3981999507e-3f;
inline constexpr float kExpC5 = 1.9875691500e-4f;

// `static inline` on purpose: see the note in format.h.
static inline float exp_approx(float x) {
  if (x != x) return x;
  x = x < kExpLo ? kExpLo : (x > kExpHi ? kExpHi : x);
  const float n = std::fma(x, kExpLog2e, kExpRound) - kExpRound;
  const float r = std::fma(n, -kExpLn2Lo, std::fma(n, -kExpLn2Hi, x));
  float p = std::fma(kExpC5, r, kExpC4);
  p = std::fma(p, r, kExpC3);
  p = std::fma(p, r, kExpC2);
  p = std::fma(p, r, kExpC1);
  p = std::fma(p, r, kExpC0);
  p = std::fma(p, r * r, r);
  p = p + 1.0f;
  const int32_t ni = static_cast<int32_t>(n);  // in [-150, 150]
  const int32_t n1 = ni / 2;
  const int32_t n2 = ni - n1;
  const uint32_t b1 = static_cast<uint32_t>(n1 + 127) << 23;
  const uint32_t b2 = static_cast<uint32_t>(n2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, 4);
  std::memcpy(&s2, &b2, 4);
  return (p * s1) * s2;
}

}  // namespace drift::kernels
