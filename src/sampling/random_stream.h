// A counter-based random stream: the n-th draw of a request depends only on (seed, n), so a
// seeded request samples the same text alone, in any batch, or after being preempted and
// recomputed — there is no generator state to carry along or to disturb.
#pragma once

#include <cstdint>

namespace drift {

// SplitMix64's finaliser: a bijective 64-bit mixer with good avalanche.
constexpr uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// 64 random bits for draw `counter` of the stream `seed`.
constexpr uint64_t stream_bits(uint64_t seed, uint64_t counter) {
  return mix64(mix64(seed ^ 0x9e3779b97f4a7c15ull) + counter * 0xd1b54a32d192ed03ull);
}

// A uniform double in [0, 1) for draw `counter` of the stream `seed` (53 random bits).
constexpr double stream_uniform(uint64_t seed, uint64_t counter) {
  return static_cast<double>(stream_bits(seed, counter) >> 11) * 0x1.0p-53;
}

}  // namespace drift
