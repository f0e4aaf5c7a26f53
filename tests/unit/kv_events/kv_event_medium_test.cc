// The medium of a KV event: pages of the engine's pool are vLLM's "GPU" (the engine's own KV
// memory), pages of the disk tier "DISK", in both BlockStored and BlockRemoved.
#include <gtest/gtest.h>

#include <map>
#include <msgpack.hpp>
#include <string>
#include <vector>

#include "kv_events/kv_event_encoding.h"

namespace drift {
namespace {

// The "medium" of each event of an encoded batch, in order.
std::vector<std::string> media_of(const std::string& payload) {
  msgpack::object_handle handle = msgpack::unpack(payload.data(), payload.size());
  std::vector<msgpack::object> batch;
  handle.get().convert(batch);
  std::vector<std::map<std::string, msgpack::object>> events;
  batch.at(1).convert(events);
  std::vector<std::string> media;
  for (const auto& e : events) media.push_back(e.at("medium").as<std::string>());
  return media;
}

TEST(KVEventMedium, PoolPagesAreGpuAndDiskPagesAreDisk) {
  KVEventQueue queue(8, 4);
  const std::vector<TokenId> tokens = {1, 2, 3, 4};
  ASSERT_TRUE(queue.push(KVEventKind::kBlockStored, 11, std::nullopt, tokens));
  ASSERT_TRUE(queue.push(KVEventKind::kBlockRemoved, 11, std::nullopt, {}));
  ASSERT_TRUE(queue.push(KVEventKind::kBlockStored, 11, std::nullopt, tokens, KVMedium::kDisk));
  ASSERT_TRUE(queue.push(KVEventKind::kBlockRemoved, 11, std::nullopt, {}, KVMedium::kDisk));
  KVEventBatch batch;
  ASSERT_EQ(queue.pop(batch, 8, std::chrono::milliseconds(0)), 4u);
  EXPECT_EQ(media_of(encode_kv_event_batch(batch.events, 1.0, 4)),
            (std::vector<std::string>{"GPU", "GPU", "DISK", "DISK"}));
}

}  // namespace
}  // namespace drift
