// Drafts shared across requests for speculative decoding: a bounded table of "after these
// `context` tokens came this one", filled from every request's prompt and output, so that what
// one request wrote (a JSON shape, a tool call's scaffolding, a document quoted before) drafts the
// next request's tokens where its own history has nothing to offer (llama.cpp's ngram-mod and
// SuffixDecoding do the same). A draft is only a guess that the executor verifies, so a stale or
// colliding entry costs one step's extra compute, never a different output.
//
// Memory is the table, allocated once at construction and never grown: a new entry overwrites
// whatever shared its slot (the most recent text wins). Recording and proposing allocate nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "scheduler/sequence_state.h"

namespace drift {

class NgramPool {
 public:
  static constexpr int32_t kMaxContext = 8;
  static constexpr size_t kEntryBytes = 8;  // a slot: the key's check bits and the token

  // A table of `entries` slots (rounded down to a power of two; 0: a pool that records and
  // proposes nothing) keyed by `context` tokens, in [1, kMaxContext].
  explicit NgramPool(int64_t entries = 0, int32_t context = 4);

  bool enabled() const { return !table_.empty(); }
  int32_t context() const { return context_; }
  // The table's memory, the pool's whole footprint.
  size_t bytes() const { return table_.size() * sizeof(Entry); }

  // Records, for every position i >= from of `tokens` with `context` tokens before it, that
  // tokens[i] followed them. Entries of different namespaces never meet (the prefix cache's:
  // one tenant's text never drafts for another, nor its speed reveals it).
  void record(std::span<const TokenId> tokens, size_t from, uint64_t cache_namespace);

  // Writes into `out` (at most out.size() tokens) the chain of tokens the table says follow the
  // last `context` tokens of `tokens`, each looked up after the ones before it, and returns how
  // many (0: nothing recorded after that suffix; `out` then is untouched).
  int32_t propose(std::span<const TokenId> tokens, uint64_t cache_namespace,
                  std::span<TokenId> out) const;

 private:
  struct Entry {
    uint32_t check = 0;  // the key's high bits: a slot shared by another key says nothing
    TokenId next = -1;   // -1: empty
  };
  static_assert(sizeof(Entry) == kEntryBytes);
  uint64_t key(std::span<const TokenId> window, uint64_t cache_namespace) const;

  std::vector<Entry> table_;
  uint64_t mask_ = 0;
  int32_t context_;
};

}  // namespace drift
