// The Responses API's bounded store (response_store.h): the oldest responses go first when the
// count or the byte cap is reached, every response goes when its TTL has passed, and a deleted
// or unknown id is not found.
#include "server/response_store.h"

#include <gtest/gtest.h>

#include <string>

namespace drift::server {
namespace {

using Clock = ResponseStore::Clock;

StoredResponse of_bytes(size_t bytes) { return StoredResponse{std::string(bytes, 'x'), "", ""}; }

TEST(ResponseStore, KeepsGetsAndErases) {
  ResponseStore store({.max_count = 4, .max_bytes = 1000, .ttl = std::chrono::seconds(60)});
  EXPECT_TRUE(store.put("a", StoredResponse{"{}", "[]", "be brief"}));
  const std::optional<StoredResponse> a = store.get("a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->body, "{}");
  EXPECT_EQ(a->conversation, "[]");
  EXPECT_EQ(a->instructions, "be brief");
  EXPECT_FALSE(store.get("b"));
  EXPECT_TRUE(store.erase("a"));
  EXPECT_FALSE(store.erase("a"));
  EXPECT_FALSE(store.get("a"));
  EXPECT_EQ(store.stats().count, 0u);
  EXPECT_EQ(store.stats().bytes, 0u);
}

TEST(ResponseStore, EvictsTheOldestBeyondTheCount) {
  ResponseStore store({.max_count = 2, .max_bytes = 1000, .ttl = std::chrono::seconds(60)});
  store.put("a", of_bytes(10));
  store.put("b", of_bytes(10));
  store.put("c", of_bytes(10));
  EXPECT_FALSE(store.get("a"));
  EXPECT_TRUE(store.get("b"));
  EXPECT_TRUE(store.get("c"));
  const ResponseStoreStats stats = store.stats();
  EXPECT_EQ(stats.count, 2u);
  EXPECT_EQ(stats.bytes, 20u);
  EXPECT_EQ(stats.evictions, 1u);
}

TEST(ResponseStore, EvictsTheOldestBeyondTheBytesAndRefusesOneTooLargeAlone) {
  ResponseStore store({.max_count = 100, .max_bytes = 100, .ttl = std::chrono::seconds(60)});
  store.put("a", of_bytes(40));
  store.put("b", of_bytes(40));
  store.put("c", of_bytes(40));  // 120 > 100: a goes
  EXPECT_FALSE(store.get("a"));
  EXPECT_TRUE(store.get("b"));
  EXPECT_TRUE(store.get("c"));
  EXPECT_EQ(store.stats().bytes, 80u);
  store.put("d", of_bytes(90));  // b and c go
  EXPECT_FALSE(store.get("b"));
  EXPECT_FALSE(store.get("c"));
  EXPECT_TRUE(store.get("d"));
  EXPECT_FALSE(store.put("e", of_bytes(101)));
  EXPECT_FALSE(store.get("e"));
  EXPECT_TRUE(store.get("d")) << "a refused response evicts nothing";
  EXPECT_EQ(store.stats().evictions, 3u);
}

TEST(ResponseStore, ReplacingAnIdCountsItsBytesOnce) {
  ResponseStore store({.max_count = 10, .max_bytes = 100, .ttl = std::chrono::seconds(60)});
  store.put("a", of_bytes(60));
  store.put("a", of_bytes(70));
  EXPECT_EQ(store.stats().count, 1u);
  EXPECT_EQ(store.stats().bytes, 70u);
  EXPECT_EQ(store.get("a")->body.size(), 70u);
}

TEST(ResponseStore, ForgetsResponsesOlderThanTheTTL) {
  Clock::time_point now{};
  ResponseStore store({.max_count = 10, .max_bytes = 1000, .ttl = std::chrono::seconds(60)},
                      [&] { return now; });
  store.put("a", of_bytes(10));
  now += std::chrono::seconds(30);
  store.put("b", of_bytes(10));
  now += std::chrono::seconds(29);
  EXPECT_TRUE(store.get("a"));
  now += std::chrono::seconds(1);  // a is 60 s old
  EXPECT_FALSE(store.get("a"));
  EXPECT_TRUE(store.get("b"));
  EXPECT_FALSE(store.erase("a"));
  now += std::chrono::seconds(30);
  EXPECT_FALSE(store.get("b"));
  const ResponseStoreStats stats = store.stats();
  EXPECT_EQ(stats.count, 0u);
  EXPECT_EQ(stats.evictions, 2u);
}

}  // namespace
}  // namespace drift::server
