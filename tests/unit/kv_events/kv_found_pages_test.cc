// The pages a disk tier found at start, as a router hears them: the publisher holds them until a
// subscriber has subscribed (a PUB message sent to nobody is lost), then sends them as DISK
// BlockStored ahead of later events, without the pages removed from disk meanwhile.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>
#include <zmq.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <msgpack.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kv_events/zmq_kv_event_publisher.h"

namespace drift {
namespace {

struct Event {
  std::string type;
  std::string medium;
  uint64_t hash = 0;
  std::optional<uint64_t> parent;
  std::vector<TokenId> tokens;
};

// Every event of the messages a SUB socket receives within `timeout`, until `count` are in.
std::vector<Event> receive(void* sub, size_t count, std::chrono::seconds timeout) {
  std::vector<Event> events;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (events.size() < count && std::chrono::steady_clock::now() < deadline) {
    zmq_pollitem_t item{sub, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, 100) <= 0) continue;
    std::vector<std::string> frames;
    int more = 1;
    while (more) {
      zmq_msg_t msg;
      zmq_msg_init(&msg);
      zmq_msg_recv(&msg, sub, 0);
      frames.emplace_back(static_cast<char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
      more = zmq_msg_more(&msg);
      zmq_msg_close(&msg);
    }
    EXPECT_EQ(frames.size(), 3u);
    msgpack::object_handle handle = msgpack::unpack(frames[2].data(), frames[2].size());
    std::vector<msgpack::object> batch;
    handle.get().convert(batch);
    std::vector<std::map<std::string, msgpack::object>> decoded;
    batch.at(1).convert(decoded);
    for (auto& e : decoded) {
      Event ev;
      ev.type = e.at("type").as<std::string>();
      ev.medium = e.at("medium").as<std::string>();
      ev.hash = e.at("block_hashes").as<std::vector<uint64_t>>().at(0);
      if (ev.type == "BlockStored") {
        if (!e.at("parent_block_hash").is_nil())
          ev.parent = e.at("parent_block_hash").as<uint64_t>();
        ev.tokens = e.at("token_ids").as<std::vector<TokenId>>();
      }
      events.push_back(ev);
    }
  }
  return events;
}

TEST(KVFoundPages, AreSentToTheFirstSubscriberWithoutThoseRemovedMeanwhile) {
  const std::string path = "/tmp/drift-kv-found-" + std::to_string(getpid());
  const std::string endpoint = "ipc://" + path;
  auto publisher =
      ZmqKVEventPublisher::create({.endpoint = endpoint, .topic = "kv", .page_size = 2});
  ASSERT_TRUE(publisher.ok()) << publisher.error().message;
  ZmqKVEventPublisher& p = **publisher;
  p.disk_blocks_found({{11, std::nullopt, {1, 2}}, {12, 11, {3, 4}}, {13, 12, {5, 6}}});
  p.disk_block_removed(12);  // deleted from disk before anyone listened
  // The removal went out to nobody (its message numbered), before the subscriber below.
  for (int i = 0; i < 100 && p.counts().batches < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(p.counts().batches, 1u);

  void* context = zmq_ctx_new();
  void* sub = zmq_socket(context, ZMQ_SUB);
  ASSERT_EQ(zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0), 0);
  ASSERT_EQ(zmq_connect(sub, endpoint.c_str()), 0);
  std::vector<Event> events = receive(sub, 2, std::chrono::seconds(10));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, "BlockStored");
  EXPECT_EQ(events[0].medium, "DISK");
  EXPECT_EQ(events[0].hash, 11u);
  EXPECT_EQ(events[0].parent, std::nullopt);
  EXPECT_EQ(events[0].tokens, (std::vector<TokenId>{1, 2}));
  EXPECT_EQ(events[1].hash, 13u) << "12 was removed before it was sent";
  EXPECT_EQ(events[1].parent, 12u);
  EXPECT_EQ(events[1].tokens, (std::vector<TokenId>{5, 6}));

  // Later events follow them, and the found pages are not sent again.
  p.disk_block_stored(14, 13, std::vector<TokenId>{7, 8});
  events = receive(sub, 1, std::chrono::seconds(10));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].hash, 14u);
  EXPECT_EQ(events[0].medium, "DISK");
  EXPECT_EQ(p.counts().events, 1u + 2 + 1);
  zmq_close(sub);
  zmq_ctx_term(context);
  publisher->reset();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace drift
