#include "kv_events/zmq_kv_event_publisher.h"

#include <zmq.h>

#include <algorithm>
#include <array>
#include <chrono>

#include "kv_events/kv_event_encoding.h"

namespace drift {

namespace {

// vLLM's rule (ZmqEventPublisher._socket_setup): bind stable endpoints, connect to volatile ones.
bool binds(const std::string& endpoint) {
  return endpoint.find('*') != std::string::npos || endpoint.find("::") != std::string::npos ||
         endpoint.starts_with("ipc://") || endpoint.starts_with("inproc://");
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

constexpr auto kPopTimeout = std::chrono::milliseconds(100);
// How long a full socket may hold the last messages at shutdown.
constexpr auto kShutdownGrace = std::chrono::seconds(1);

}  // namespace

Expected<std::unique_ptr<ZmqKVEventPublisher>> ZmqKVEventPublisher::create(
    const KVEventPublisherConfig& config) {
  if (config.endpoint.empty()) return make_error("kv_events_endpoint: empty");
  if (config.page_size < 1 || config.queue_events < 1 || config.max_batch_events < 1)
    return make_error("kv events: page size, queue and batch sizes must be positive");
  void* context = zmq_ctx_new();
  if (!context) return make_error("kv_events_endpoint: cannot create a ZeroMQ context");
  void* socket = zmq_socket(context, ZMQ_XPUB);
  auto fail = [&](std::string_view what) -> Error {
    Error e = make_error("kv_events_endpoint '{}': {}: {}", config.endpoint, what,
                         zmq_strerror(zmq_errno()));
    if (socket) zmq_close(socket);
    zmq_ctx_term(context);
    return e;
  };
  if (!socket) return fail("cannot create the socket");
  const int one = 1;
  const int zero = 0;
  const int hwm = config.send_high_water_mark;
  if (zmq_setsockopt(socket, ZMQ_XPUB_NODROP, &one, sizeof one) != 0 ||
      zmq_setsockopt(socket, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0 ||
      zmq_setsockopt(socket, ZMQ_LINGER, &zero, sizeof zero) != 0)
    return fail("cannot configure the socket");
  const int rc = binds(config.endpoint) ? zmq_bind(socket, config.endpoint.c_str())
                                        : zmq_connect(socket, config.endpoint.c_str());
  if (rc != 0) return fail(binds(config.endpoint) ? "cannot bind" : "cannot connect");
  return std::unique_ptr<ZmqKVEventPublisher>(new ZmqKVEventPublisher(config, context, socket));
}

ZmqKVEventPublisher::ZmqKVEventPublisher(const KVEventPublisherConfig& config, void* context,
                                         void* socket)
    : config_(config),
      context_(context),
      socket_(socket),
      queue_(config.queue_events, config.page_size),
      thread_([this] { run(); }) {}

ZmqKVEventPublisher::~ZmqKVEventPublisher() {
  stopping_ = true;
  queue_.wake();
  thread_.join();
  zmq_close(socket_);
  zmq_ctx_term(context_);
}

void ZmqKVEventPublisher::block_stored(uint64_t hash, std::optional<uint64_t> parent_hash,
                                       std::span<const TokenId> tokens) {
  queue_.push(KVEventKind::kBlockStored, hash, parent_hash, tokens);
}

void ZmqKVEventPublisher::block_removed(uint64_t hash) {
  queue_.push(KVEventKind::kBlockRemoved, hash, std::nullopt, {});
}

void ZmqKVEventPublisher::disk_block_stored(uint64_t hash, std::optional<uint64_t> parent_hash,
                                            std::span<const TokenId> tokens) {
  queue_.push(KVEventKind::kBlockStored, hash, parent_hash, tokens, KVMedium::kDisk);
}

void ZmqKVEventPublisher::disk_block_removed(uint64_t hash) {
  queue_.push(KVEventKind::kBlockRemoved, hash, std::nullopt, {}, KVMedium::kDisk);
}

void ZmqKVEventPublisher::disk_blocks_found(std::vector<KVFoundBlock> blocks) {
  std::lock_guard<std::mutex> lock(found_mutex_);
  found_ = std::move(blocks);
}

void ZmqKVEventPublisher::all_blocks_cleared() {
  queue_.push(KVEventKind::kAllBlocksCleared, 0, std::nullopt, {});
}

KVEventCounts ZmqKVEventPublisher::counts() const {
  return {.events = queue_.pushed() + queue_.dropped() + found_sent_.load(),
          .dropped = queue_.dropped() + undelivered_.load(),
          .batches = sequence_.load()};
}

void ZmqKVEventPublisher::run() {
  // Rule: drain the queue a batch at a time; after stop, send what is left, then leave. The
  // pages found at start go first to the first subscriber.
  KVEventBatch batch;
  while (true) {
    if (subscribed()) send_found();
    const size_t n = queue_.pop(batch, size_t(config_.max_batch_events), kPopTimeout);
    if (n == 0) {
      if (stopping_) return;
      continue;
    }
    forget_found(batch);
    const std::string payload =
        encode_kv_event_batch(batch.events, unix_seconds(), config_.page_size);
    if (!send(payload)) undelivered_ += n;
  }
}

bool ZmqKVEventPublisher::subscribed() {
  // A subscription message is the byte 1 then the topic (0: an unsubscription).
  // Read even after the first, so that they do not pile up in the socket.
  unsigned char message[256];
  for (int got; (got = zmq_recv(socket_, message, sizeof message, ZMQ_DONTWAIT)) >= 0;)
    subscribed_ = subscribed_ || (got > 0 && message[0] == 1);
  return subscribed_;
}

void ZmqKVEventPublisher::forget_found(const KVEventBatch& batch) {
  std::lock_guard<std::mutex> lock(found_mutex_);
  if (found_.empty()) return;
  for (const KVEvent& e : batch.events)
    if (e.kind == KVEventKind::kBlockRemoved && e.medium == KVMedium::kDisk)
      found_removed_.insert(e.hash);
}

void ZmqKVEventPublisher::send_found() {
  std::vector<KVFoundBlock> found;
  std::unordered_set<uint64_t> removed;
  {
    std::lock_guard<std::mutex> lock(found_mutex_);
    found.swap(found_);
    removed.swap(found_removed_);
  }
  std::vector<KVEvent> events;
  for (const KVFoundBlock& b : found) {
    if (removed.contains(b.hash)) continue;
    events.push_back(KVEvent{KVEventKind::kBlockStored, b.hash, b.parent_hash.has_value(),
                             b.parent_hash.value_or(0), b.tokens, KVMedium::kDisk});
  }
  for (size_t at = 0; at < events.size(); at += size_t(config_.max_batch_events)) {
    const size_t n = std::min(events.size() - at, size_t(config_.max_batch_events));
    const std::string payload = encode_kv_event_batch(
        std::span<const KVEvent>(events).subspan(at, n), unix_seconds(), config_.page_size);
    found_sent_ += n;
    if (!send(payload)) undelivered_ += n;
  }
}

bool ZmqKVEventPublisher::send(const std::string& payload) {
  // The sequence number is the message's, counted only once it is accepted, so a subscriber
  // sees a gap only when a message is lost after the socket took it.
  const uint64_t seq = sequence_.load();
  std::array<unsigned char, 8> seq_bytes{};
  for (int i = 0; i < 8; ++i) seq_bytes[size_t(i)] = uint8_t(seq >> (56 - 8 * i));
  const auto deadline = std::chrono::steady_clock::now() + kShutdownGrace;
  // ZMQ_XPUB_NODROP: a full subscriber pipe refuses the first frame (EAGAIN) and takes nothing;
  // once the first frame is in, the rest of the message goes with it.
  while (zmq_send(socket_, config_.topic.data(), config_.topic.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT) <
         0) {
    if (zmq_errno() != EAGAIN) return false;
    if (stopping_ && std::chrono::steady_clock::now() > deadline) return false;
    zmq_pollitem_t item{socket_, 0, ZMQ_POLLOUT, 0};
    zmq_poll(&item, 1, 100);
  }
  zmq_send(socket_, seq_bytes.data(), seq_bytes.size(), ZMQ_SNDMORE);
  zmq_send(socket_, payload.data(), payload.size(), 0);
  sequence_ += 1;
  return true;
}

}  // namespace drift
