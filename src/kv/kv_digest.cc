#include "kv/kv_digest.h"

#define XXH_STATIC_LINKING_ONLY
#include <fmt/format.h>
#include <xxhash.h>

namespace drift {

std::string KVDigest::hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

namespace {
KVDigest of(XXH128_hash_t h) { return KVDigest{h.low64, h.high64}; }
}  // namespace

KVDigest kv_digest_root(uint64_t cache_namespace, uint64_t seed) {
  return of(XXH3_128bits_withSeed(&cache_namespace, sizeof(cache_namespace), seed));
}

KVDigest kv_digest_next(const KVDigest& parent, std::span<const TokenId> tokens) {
  // The parent's digest seeds the page's: (parent, tokens) -> child, page by page.
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_128bits_reset_withSeed(&state, parent.lo ^ (parent.hi * 0xC2B2AE3D27D4EB4Full));
  XXH3_128bits_update(&state, &parent, sizeof(parent));
  XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
  return of(XXH3_128bits_digest(&state));
}

KVDigest kv_digest_of_group(const KVDigest& digest, int32_t group) {
  // Another seed than kv_digest_next's over the same bytes, so that no page of tokens [group]
  // after `digest` gets this name.
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_128bits_reset_withSeed(&state, ~(digest.lo ^ (digest.hi * 0xC2B2AE3D27D4EB4Full)));
  XXH3_128bits_update(&state, &digest, sizeof(digest));
  XXH3_128bits_update(&state, &group, sizeof(group));
  return of(XXH3_128bits_digest(&state));
}

KVDigest kv_digest_bytes(std::span<const uint8_t> bytes, uint64_t seed) {
  return of(XXH3_128bits_withSeed(bytes.data(), bytes.size(), seed));
}

uint64_t kv_checksum(std::span<const uint8_t> bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

}  // namespace drift
