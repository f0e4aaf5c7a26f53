// The engine-to-publisher queue: events come out in order with their tokens, a full queue drops
// and counts instead of waiting, and a pop takes at most the batch size asked.
#include "kv_events/kv_event_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace drift {
namespace {

using std::chrono::milliseconds;

TEST(KVEventQueue, HandsOverEventsInOrderWithTheirTokens) {
  KVEventQueue q(4, 2);
  const std::vector<TokenId> a{7, 8};
  ASSERT_TRUE(q.push(KVEventKind::kBlockStored, 11, std::nullopt, a));
  ASSERT_TRUE(q.push(KVEventKind::kBlockStored, 12, 11, std::vector<TokenId>{9, 10}));
  ASSERT_TRUE(q.push(KVEventKind::kBlockRemoved, 11, std::nullopt, {}));
  KVEventBatch batch;
  ASSERT_EQ(q.pop(batch, 2, milliseconds(0)), 2u);
  EXPECT_EQ(batch.events[0].hash, 11u);
  EXPECT_FALSE(batch.events[0].has_parent);
  EXPECT_EQ(std::vector<TokenId>(batch.events[0].tokens.begin(), batch.events[0].tokens.end()), a);
  EXPECT_TRUE(batch.events[1].has_parent);
  EXPECT_EQ(batch.events[1].parent_hash, 11u);
  EXPECT_EQ(batch.events[1].tokens[1], 10);
  ASSERT_EQ(q.pop(batch, 8, milliseconds(0)), 1u);
  EXPECT_EQ(batch.events[0].kind, KVEventKind::kBlockRemoved);
  EXPECT_TRUE(batch.events[0].tokens.empty());
  EXPECT_EQ(q.pop(batch, 8, milliseconds(1)), 0u);
}

TEST(KVEventQueue, AFullQueueDropsAndCountsWithoutWaiting) {
  KVEventQueue q(2, 2);
  EXPECT_TRUE(q.push(KVEventKind::kAllBlocksCleared, 0, std::nullopt, {}));
  EXPECT_TRUE(q.push(KVEventKind::kAllBlocksCleared, 0, std::nullopt, {}));
  EXPECT_FALSE(q.push(KVEventKind::kAllBlocksCleared, 0, std::nullopt, {}));
  EXPECT_FALSE(q.push(KVEventKind::kBlockStored, 1, std::nullopt, std::vector<TokenId>{1, 2, 3}))
      << "more tokens than a page";
  EXPECT_EQ(q.pushed(), 2u);
  EXPECT_EQ(q.dropped(), 2u);
  KVEventBatch batch;
  EXPECT_EQ(q.pop(batch, 8, milliseconds(0)), 2u);
  EXPECT_TRUE(q.push(KVEventKind::kBlockRemoved, 5, std::nullopt, {})) << "room again";
  // The ring wrapped: the new event is the only one.
  EXPECT_EQ(q.pop(batch, 8, milliseconds(0)), 1u);
  EXPECT_EQ(batch.events[0].hash, 5u);
}

}  // namespace
}  // namespace drift
