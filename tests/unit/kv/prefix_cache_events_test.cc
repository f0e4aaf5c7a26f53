// The prefix cache's KV events (vLLM's BlockStored / BlockRemoved / AllBlocksCleared): one stored
// event per new hash with its parent's hash and tokens, one removed event when the last page of a
// hash is evicted, and a flush that clears everything sent as one AllBlocksCleared.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "kv/kv_event_sink.h"
#include "kv/prefix_cache.h"

namespace drift {
namespace {

using Tokens = std::vector<TokenId>;
constexpr int32_t kPageSize = 4;

struct RecordedEvent {
  std::string kind;  // stored, removed, cleared
  uint64_t hash = 0;
  std::optional<uint64_t> parent;
  Tokens tokens;
  bool operator==(const RecordedEvent&) const = default;
};

class RecordingSink final : public KVEventSink {
 public:
  void block_stored(uint64_t hash, std::optional<uint64_t> parent,
                    std::span<const TokenId> tokens) override {
    events.push_back({"stored", hash, parent, Tokens(tokens.begin(), tokens.end())});
  }
  void block_removed(uint64_t hash) override { events.push_back({"removed", hash, {}, {}}); }
  void all_blocks_cleared() override { events.push_back({"cleared", 0, {}, {}}); }
  KVEventCounts counts() const override { return {}; }
  std::vector<RecordedEvent> events;
};

KVCacheManager make_kv(int32_t num_pages) {
  KVLayout layout{.num_layers = 1, .num_kv_heads = 1, .head_dim = 4, .page_size = kPageSize};
  auto kv = KVCacheManager::create(layout, num_pages);
  EXPECT_TRUE(kv.ok());
  return std::move(kv).value();
}

Tokens page_of(TokenId start) {
  Tokens t;
  for (int32_t i = 0; i < kPageSize; ++i) t.push_back(start + i);
  return t;
}

// Opens `seq` over the concatenated pages and registers each.
void write_and_register(KVCacheManager& kv, PrefixCache& cache, SeqId seq,
                        const std::vector<Tokens>& pages) {
  ASSERT_TRUE(kv.open(seq, int64_t(pages.size()) * kPageSize).ok());
  ASSERT_TRUE(kv.append(seq, int32_t(pages.size()) * kPageSize));
  PrefixCursor c = cache.root(0);
  for (size_t i = 0; i < pages.size(); ++i) c = cache.insert(c, pages[i], kv.pages(seq)[i]);
}

TEST(PrefixCacheEvents, StoredEventsChainEachPageToItsParentsHash) {
  KVCacheManager kv = make_kv(8);
  RecordingSink sink;
  PrefixCache cache(kv, default_prefix_hash, &sink);
  write_and_register(kv, cache, 1, {page_of(10), page_of(20)});
  const uint64_t h1 = default_prefix_hash(cache.root(0).hash, page_of(10));
  const uint64_t h2 = default_prefix_hash(h1, page_of(20));
  EXPECT_EQ(sink.events, (std::vector<RecordedEvent>{{"stored", h1, std::nullopt, page_of(10)},
                                                     {"stored", h2, h1, page_of(20)}}));

  // The same prefix again, and a branch off it: only the new page is news.
  write_and_register(kv, cache, 2, {page_of(10), page_of(30)});
  const uint64_t h3 = default_prefix_hash(h1, page_of(30));
  ASSERT_EQ(sink.events.size(), 3u);
  EXPECT_EQ(sink.events[2], (RecordedEvent{"stored", h3, h1, page_of(30)}));
}

TEST(PrefixCacheEvents, EvictionRemovesTheHashOnlyWhenItsLastPageGoes) {
  KVCacheManager kv = make_kv(3);
  RecordingSink sink;
  PrefixCache cache(kv, default_prefix_hash, &sink);
  write_and_register(kv, cache, 1, {page_of(10), page_of(20)});  // pages 0, 1
  ASSERT_TRUE(kv.release(1));
  sink.events.clear();
  // Three pages for a new sequence: the free one, then the deepest cached page (1), then 0.
  ASSERT_TRUE(kv.open(2, 3 * kPageSize).ok());
  ASSERT_TRUE(kv.append(2, 2 * kPageSize));
  const uint64_t h1 = default_prefix_hash(cache.root(0).hash, page_of(10));
  const uint64_t h2 = default_prefix_hash(h1, page_of(20));
  EXPECT_EQ(sink.events, (std::vector<RecordedEvent>{{"removed", h2, {}, {}}}));
  ASSERT_TRUE(kv.append(2, kPageSize));
  EXPECT_EQ(sink.events,
            (std::vector<RecordedEvent>{{"removed", h2, {}, {}}, {"removed", h1, {}, {}}}));
  EXPECT_EQ(cache.num_registered(), 0);
}

// Every page hashes alike: a second page under a known hash sends nothing, and removing one of
// two pages of a hash leaves it stored.
uint64_t colliding_hash(uint64_t, std::span<const TokenId>) { return 42; }

TEST(PrefixCacheEvents, OneEventPerHashUnderCollisions) {
  KVCacheManager kv = make_kv(4);
  RecordingSink sink;
  PrefixCache cache(kv, colliding_hash, &sink);
  write_and_register(kv, cache, 1, {page_of(10)});  // page 0
  write_and_register(kv, cache, 2, {page_of(20)});  // page 1: same hash, other content
  EXPECT_EQ(cache.num_registered(), 2);
  ASSERT_EQ(sink.events.size(), 1u);
  ASSERT_TRUE(kv.release(1));
  ASSERT_TRUE(kv.open(3, 3 * kPageSize).ok());
  ASSERT_TRUE(kv.append(3, 3 * kPageSize));  // pages 2, 3, then evicts 0
  EXPECT_EQ(cache.num_registered(), 1);
  EXPECT_EQ(sink.events.size(), 1u) << "page 1 still holds hash 42";
}

TEST(PrefixCacheEvents, AFlushThatClearsEverythingIsOneAllBlocksCleared) {
  KVCacheManager kv = make_kv(8);
  RecordingSink sink;
  PrefixCache cache(kv, default_prefix_hash, &sink);
  write_and_register(kv, cache, 1, {page_of(10), page_of(20)});
  write_and_register(kv, cache, 2, {page_of(30)});
  ASSERT_TRUE(kv.release(1));
  sink.events.clear();
  // Sequence 2 still holds its page: the flush removes 1's two hashes one by one.
  EXPECT_EQ(cache.flush(), 2);
  ASSERT_EQ(sink.events.size(), 2u);
  EXPECT_EQ(sink.events[0].kind, "removed");
  EXPECT_EQ(sink.events[1].kind, "removed");
  ASSERT_TRUE(kv.release(2));
  sink.events.clear();
  EXPECT_EQ(cache.flush(), 1);
  EXPECT_EQ(sink.events, (std::vector<RecordedEvent>{{"cleared", 0, {}, {}}}));
  EXPECT_EQ(cache.num_registered(), 0);
}

}  // namespace
}  // namespace drift
