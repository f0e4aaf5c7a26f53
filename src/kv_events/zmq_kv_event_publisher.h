// Publishes the prefix cache's KV events as vLLM's ZmqEventPublisher does, so that KV-aware
// routers (llm-d's KV cache manager, Dynamo's KV router) can follow a drift replica: a ZeroMQ PUB
// socket, one message of three frames per batch — topic, 8-byte big-endian sequence number
// (0, 1, 2, ... from process start, so a subscriber sees a restart), msgpack KVEventBatch
// (kv_event_encoding.h).
//
// Like vLLM's, the endpoint is bound when it has a wildcard ("tcp://*:5557", "::") or is ipc:// or
// inproc://, and connected to otherwise (llm-d's router binds and the replicas connect to it).
//
// The engine's worker only pushes into a KVEventQueue; a thread of its own encodes and sends.
// The socket is an XPUB with ZMQ_XPUB_NODROP, so a subscriber that cannot keep up makes the send
// wait instead of being silently skipped; meanwhile the queue fills, and what does not fit is
// dropped and counted (counts().dropped, drift:kv_events_dropped_total in /metrics).
//
// The pages a disk tier found at start (disk_blocks_found) are sent as DISK BlockStored once a
// subscriber has subscribed (XPUB hands subscriptions to its owner; a PUB message sent to no
// subscriber is lost), ahead of every later event, and without the pages a DISK BlockRemoved
// took away meanwhile; so a router that subscribes to a restarted replica learns what its disk
// holds. Sent once: a later subscriber learns from the stream as vLLM's does.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "kv/kv_event_sink.h"
#include "kv_events/kv_event_queue.h"
#include "util/error.h"

namespace drift {

struct KVEventPublisherConfig {
  std::string endpoint;  // e.g. tcp://*:5557 (bind) or tcp://router:5557 (connect)
  std::string topic;     // first frame of every message; subscribers filter on its prefix
  int32_t page_size = 16;
  int32_t queue_events = 16384;          // events the engine may get ahead of the socket
  int32_t max_batch_events = 1024;       // events per message at most
  int32_t send_high_water_mark = 10000;  // messages ZeroMQ buffers per subscriber
};

class ZmqKVEventPublisher final : public KVEventSink {
 public:
  // Opens the socket (an error names the endpoint) and starts the sending thread.
  static Expected<std::unique_ptr<ZmqKVEventPublisher>> create(
      const KVEventPublisherConfig& config);
  // Sends what is queued (waiting at most a second for slow subscribers), then closes.
  ~ZmqKVEventPublisher() override;

  void block_stored(uint64_t hash, std::optional<uint64_t> parent_hash,
                    std::span<const TokenId> tokens) override;
  void block_removed(uint64_t hash) override;
  void all_blocks_cleared() override;
  void disk_block_stored(uint64_t hash, std::optional<uint64_t> parent_hash,
                         std::span<const TokenId> tokens) override;
  void disk_block_removed(uint64_t hash) override;
  void disk_blocks_found(std::vector<KVFoundBlock> blocks) override;
  KVEventCounts counts() const override;

 private:
  ZmqKVEventPublisher(const KVEventPublisherConfig& config, void* context, void* socket);
  void run();
  // Sends one message; false if the socket stayed full until shutdown.
  bool send(const std::string& payload);
  // Reads the subscriptions XPUB passed on; true once one has arrived.
  bool subscribed();
  // The found pages not removed since, once a subscriber is there.
  void send_found();
  // Takes the pages `batch` removes from disk out of the found pages not sent yet.
  void forget_found(const KVEventBatch& batch);

  const KVEventPublisherConfig config_;
  void* context_;  // zmq context
  void* socket_;   // XPUB; used only by the sending thread after construction
  KVEventQueue queue_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> sequence_{0};     // next message's number
  std::atomic<uint64_t> undelivered_{0};  // events in messages given up at shutdown
  std::atomic<uint64_t> found_sent_{0};   // found pages' events handed to the socket
  bool subscribed_ = false;               // the sending thread's
  std::mutex found_mutex_;
  std::vector<KVFoundBlock> found_;             // disk_blocks_found, until sent
  std::unordered_set<uint64_t> found_removed_;  // hashes removed from disk before they were sent
  std::thread thread_;
};

}  // namespace drift
