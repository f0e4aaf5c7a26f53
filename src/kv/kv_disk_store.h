// The disk tier's store: KV pages as files in a directory, content-addressed, checked, within a
// byte budget, written and read on an I/O thread of its own (docs/design-notes.md "A disk tier
// for the KV cache").
//
// DIR/lock       flock'ed for the store's life: a second server on DIR is refused
// DIR/secret     16 random bytes, made once: seeds the page digests (kv_digest.h)
// DIR/<fp>/      one folder per model fingerprint (weights, KV dtype, page layout, RoPE): another
//                model never reads, evicts or counts a page of this one
// DIR/<fp>/<name>.kvp     one page: a header (magic, version, fingerprint, digests of the prefix
//                through the page and before it, namespace, chain hashes, KV group, payload
//                checksum, header checksum), the page's token ids, then its K/V bytes. A group-0
//                page is named by its digest, a page of KV group g > 0 (the sliding-window
//                groups' pages of the same tokens) by kv_digest_of_group(digest, g).
//
// A page becomes visible only whole: it is written to DIR/<fp>/tmp-<digest>.<pid> and renamed.
// At start the folder is indexed from the headers alone (no payload is read): leftover temp files
// (a crash mid-write), truncated files and bad headers are deleted. A read checks everything
// again — header, token ids, the parent digest and namespace the reader expects, the payload's
// XXH3 checksum — and a page that fails is deleted and reported failed, never used. The budget
// holds after every write: least recently used pages (by write or read; at start by mtime) go
// first.
//
// Threads: write/contains/read/take_completed are called from the engine's worker; files are
// touched only by the I/O thread. A write copies the page into one of a fixed set of staging
// slots (no allocation; a full set drops the write and counts it); reads go before writes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kv/kv_digest.h"
#include "util/error.h"

namespace drift {

struct KVDiskStoreConfig {
  std::string dir;
  uint64_t budget_bytes = 0;   // the files of this fingerprint stay within it (> 0)
  KVDigest fingerprint;        // what a page's K/V depends on besides its tokens
  int32_t page_size = 16;      // tokens per page
  uint64_t page_bytes = 0;     // K/V bytes per page
  int32_t staging_pages = 16;  // pages copied out and waiting for the I/O thread
  // Keep the token ids of the full group-0 pages found at start for take_pages_found_at_start
  // (KV events announce them to routers).
  bool keep_pages_found = false;
};

// What names a page on disk and what a read must find there.
struct KVDiskPageKey {
  KVDigest digest;  // of the prefix through the page
  KVDigest parent;  // of the prefix before it
  uint64_t cache_namespace = 0;
  uint64_t hash = 0;  // the prefix cache's chain hash (KV events)
  std::optional<uint64_t> parent_hash;
  // Fewer tokens than a page holds: a swapped-out sequence's last page (prefix_disk_tier.h),
  // no prefix block (KV events never announce it). Set by the store from the tokens written
  // (or, at start, found): the file pads them with kPartialPagePadding.
  bool partial = false;
  // The KV group whose layers the page holds (kv_layout.h): 0 for the chain of the prefix cache,
  // g > 0 for the page of group g beside it (same digest, parent and tokens).
  int32_t group = 0;
};

// What names a page's file, index entry and staging slot: its digest in group 0, else the digest
// of (digest, group).
inline KVDigest kv_disk_name(const KVDigest& digest, int32_t group) {
  return group == 0 ? digest : kv_digest_of_group(digest, group);
}

// A full group-0 page found on disk at start, with its token ids (take_pages_found_at_start).
struct KVDiskFoundPage {
  KVDiskPageKey key;
  std::vector<TokenId> tokens;  // [page_size]
};

// What fills the token ids of a partial page's file after its tokens: no token id is negative,
// so a full page never ends with it.
inline constexpr TokenId kPartialPagePadding = -1;

struct KVDiskStats {
  uint64_t pages = 0;  // on disk now (this fingerprint)
  uint64_t bytes = 0;  // their file bytes
  uint64_t budget_bytes = 0;
  uint64_t pages_indexed_at_start = 0;
  uint64_t files_dropped_at_start = 0;  // temp files of a crash, truncated files, bad headers
  uint64_t pages_written = 0;
  uint64_t bytes_written = 0;
  double write_seconds = 0;
  uint64_t pages_read = 0;  // read back and checked good
  uint64_t bytes_read = 0;
  double read_seconds = 0;
  uint64_t read_failures = 0;   // missing, truncated, mismatched or failing its checksum: dropped
  uint64_t writes_dropped = 0;  // no staging slot free
  uint64_t write_errors = 0;    // the file system refused (full disk, permissions)
  uint64_t pages_evicted = 0;   // deleted to stay within the budget
};

// A page the store added or removed (for KV events with medium "DISK"); called on the I/O thread.
struct KVDiskChange {
  bool stored = false;  // false: removed
  KVDiskPageKey key;
  std::span<const TokenId> tokens;  // stored only; valid during the call
};

class KVDiskStore {
 public:
  // Takes DIR's lock (error naming the holder's pid if another process has it), indexes the
  // fingerprint's folder and starts the I/O thread.
  static Expected<std::unique_ptr<KVDiskStore>> open(const KVDiskStoreConfig& config);
  // Finishes every queued write and read, then releases the lock.
  ~KVDiskStore();
  KVDiskStore(const KVDiskStore&) = delete;
  KVDiskStore& operator=(const KVDiskStore&) = delete;

  // The seed of page digests in this directory (kv_digest_root): fingerprint and secret.
  uint64_t digest_seed() const { return digest_seed_; }
  const KVDiskStoreConfig& config() const { return config_; }
  const std::string& folder() const { return folder_; }
  // Bytes of one page's file (header, tokens, K/V).
  uint64_t file_bytes() const;

  // Copies a page (its page_size `tokens` — or fewer, a partial page — and page_bytes `bytes`)
  // to a staging slot and queues its write. False when nothing was queued: the page is on disk
  // already (it becomes the most recent), or no slot is free (counted in writes_dropped) unless
  // `wait_for_slot`.
  bool write(const KVDiskPageKey& key, std::span<const TokenId> tokens,
             std::span<const uint8_t> bytes, bool wait_for_slot = false);
  // Whether a page of this digest, parent, namespace and group is on disk or queued to be written
  // (a read of a queued page is served from its staging slot).
  bool contains(const KVDigest& digest, const KVDigest& parent, uint64_t cache_namespace,
                int32_t group = 0) const;
  // Whether a page of this digest and group is on disk or queued to be written (its LRU place
  // unchanged).
  bool holds(const KVDigest& digest, int32_t group = 0) const;
  // Staging slots free now: how many writes would be queued without dropping one.
  int32_t num_free_slots() const;
  // Queues a read of the page into `dest` ([page_bytes], kept alive and untouched by others until
  // the read completes); it succeeds only if the file holds exactly `key` and `tokens` (fewer
  // than page_size: a partial page). Returns a
  // ticket that take_completed reports.
  uint64_t read(const KVDiskPageKey& key, std::span<const TokenId> tokens, std::span<uint8_t> dest);
  // Appends (ticket, ok) of the reads finished since the last call.
  void take_completed(std::vector<std::pair<uint64_t, bool>>& out);
  // Called on the I/O thread after each finished read (the engine wakes its worker).
  void set_on_read_done(std::function<void()> callback);
  // Called on the I/O thread for each page stored or removed.
  void set_on_change(std::function<void(const KVDiskChange&)> callback);
  // Waits until every queued job is done.
  void drain();
  // The full group-0 pages found at start (config keep_pages_found) that are still on disk, in
  // LRU order; hands them over once (later calls return none).
  std::vector<KVDiskFoundPage> take_pages_found_at_start();
  KVDiskStats stats() const;

 private:
  // Index entries, staging slots and files are named by kv_disk_name(key).
  struct Entry {
    KVDiskPageKey key;
    uint64_t file_bytes = 0;
    std::list<KVDigest>::iterator lru;  // front: least recently used
  };
  struct Staged {
    bool queued = false;  // holds a page waiting for (or in) its write
    KVDigest name;        // kv_disk_name of its key
    KVDiskPageKey key;
    std::vector<TokenId> tokens;  // [page_size]
    std::vector<uint8_t> bytes;   // [page_bytes]
  };
  struct ReadJob {
    uint64_t ticket = 0;
    KVDiskPageKey key;
    std::vector<TokenId> tokens;
    std::span<uint8_t> dest;
  };

  explicit KVDiskStore(const KVDiskStoreConfig& config);
  Status lock_dir();
  Status load_secret();
  void index_folder();
  void io_loop();
  void write_page(Staged& staged);
  bool read_page(const ReadJob& job);
  // A read of a page still in staging (mutex_ held): its slot, or -1.
  int32_t staged_slot_locked(const KVDigest& name) const;
  bool read_staged(const ReadJob& job, const Staged& staged);
  // Deletes a page's file and index entry (mutex_ held by the caller).
  void drop_locked(const KVDigest& name, bool evicted);
  void enforce_budget_locked();
  std::string path_of(const KVDigest& name) const;

  KVDiskStoreConfig config_;
  std::string folder_;
  int lock_fd_ = -1;
  uint64_t digest_seed_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable work_;  // jobs queued, or stopping
  std::condition_variable idle_;  // a job finished, or a slot freed
  std::unordered_map<KVDigest, Entry, KVDigestHash> index_;
  std::list<KVDigest> lru_;             // names, least recently used first
  std::vector<KVDiskFoundPage> found_;  // keep_pages_found: what index_folder found
  std::vector<Staged> staging_;         // [staging_pages]
  std::vector<int32_t> free_slots_;     // indices into staging_
  std::deque<int32_t> write_queue_;     // staged slots to write, in order
  std::deque<ReadJob> read_queue_;
  std::vector<std::pair<uint64_t, bool>> completed_;
  uint64_t next_ticket_ = 1;
  int32_t busy_ = 0;  // jobs the I/O thread is running
  bool stopping_ = false;
  KVDiskStats stats_;
  std::function<void()> on_read_done_;
  std::function<void(const KVDiskChange&)> on_change_;
  std::thread thread_;
};

}  // namespace drift
