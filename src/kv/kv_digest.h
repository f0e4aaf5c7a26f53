// A 128-bit digest of a page-aligned token prefix, chained page by page like the prefix cache's
// 64-bit hash but strong enough to name a page outside the process: the disk tier stores a page
// under the digest of everything up to its end (kv_disk_store.h).
//
// The chain starts from a root of (namespace, seed); the seed carries what must keep pages of
// different models apart (the model fingerprint) and a secret of the cache directory, so that
// nobody who can send prompts can craft two prefixes with one digest. XXH3-128 (Debian's
// libxxhash).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "kv/kv_types.h"

namespace drift {

using TokenId = int32_t;

struct KVDigest {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const KVDigest&) const = default;
  // 32 lowercase hex digits (hi then lo): a file name.
  std::string hex() const;
};

struct KVDigestHash {
  size_t operator()(const KVDigest& d) const {
    return size_t(d.lo ^ (d.hi * 0x9E3779B97F4A7C15ull));
  }
};

// The digest of an empty prefix in `cache_namespace`.
KVDigest kv_digest_root(uint64_t cache_namespace, uint64_t seed);
// The digest after one more page of `tokens`.
KVDigest kv_digest_next(const KVDigest& parent, std::span<const TokenId> tokens);
// What names the page of KV group `group` (> 0) beside the group-0 page whose prefix has digest
// `digest` (KV groups: kv_layout.h); never the digest of a page of tokens.
KVDigest kv_digest_of_group(const KVDigest& digest, int32_t group);
// XXH3-128 of arbitrary bytes (fingerprints), and XXH3-64 (checksums).
KVDigest kv_digest_bytes(std::span<const uint8_t> bytes, uint64_t seed = 0);
uint64_t kv_checksum(std::span<const uint8_t> bytes);

}  // namespace drift
