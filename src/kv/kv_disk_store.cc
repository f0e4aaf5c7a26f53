#include "kv/kv_disk_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

namespace drift {
namespace {

constexpr char kMagic[8] = {'D', 'R', 'I', 'F', 'T', 'K', 'V', '\0'};
constexpr uint32_t kVersion = 1;
constexpr const char* kSuffix = ".kvp";
constexpr const char* kTempPrefix = "tmp-";

// The fixed part of a page file (little-endian, as the host writes it), then
// tokens[page_size] (int32), then the payload.
struct PageFileHeader {
  char magic[8];
  uint32_t version;
  uint32_t page_size;
  uint64_t payload_bytes;
  KVDigest fingerprint;
  KVDigest digest;
  KVDigest parent;
  uint64_t cache_namespace;
  uint64_t hash;
  uint64_t parent_hash;
  // Was one uint64_t has_parent_hash: a group-0 page's header is the same bytes as before groups.
  uint32_t has_parent_hash;
  uint32_t group;
  uint64_t payload_checksum;
  uint64_t header_checksum;  // of every byte above and the tokens
};
static_assert(sizeof(PageFileHeader) == 120);

uint64_t header_checksum(const PageFileHeader& h, std::span<const TokenId> tokens) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(&h);
  const KVDigest a = kv_digest_bytes({bytes, offsetof(PageFileHeader, header_checksum)});
  const KVDigest b =
      kv_digest_bytes({reinterpret_cast<const uint8_t*>(tokens.data()), tokens.size_bytes()}, a.lo);
  return b.lo ^ b.hi;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool read_exact(int fd, void* out, size_t n, off_t offset) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= size_t(got);
    offset += got;
  }
  return true;
}

bool write_exact(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t put = ::write(fd, p, n);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    n -= size_t(put);
  }
  return true;
}

Status make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Status::Ok();
    return make_error("kv cache dir: '{}' exists and is not a directory", path);
  }
  return make_error("kv cache dir: cannot create '{}': {}", path, std::strerror(errno));
}

}  // namespace

KVDiskStore::KVDiskStore(const KVDiskStoreConfig& config) : config_(config) {
  stats_.budget_bytes = config.budget_bytes;
}

Expected<std::unique_ptr<KVDiskStore>> KVDiskStore::open(const KVDiskStoreConfig& config) {
  if (config.dir.empty()) return make_error("kv cache dir: no directory given");
  if (config.budget_bytes == 0) return make_error("kv cache dir: the byte budget must be > 0");
  if (config.page_size < 1 || config.page_bytes == 0 || config.staging_pages < 1)
    return make_error("kv cache dir: pages of {} tokens and {} bytes, {} staging slots",
                      config.page_size, config.page_bytes, config.staging_pages);
  std::unique_ptr<KVDiskStore> store(new KVDiskStore(config));
  DRIFT_RETURN_IF_ERROR(make_dir(config.dir));
  DRIFT_RETURN_IF_ERROR(store->lock_dir());
  DRIFT_RETURN_IF_ERROR(store->load_secret());
  store->folder_ = config.dir + "/" + config.fingerprint.hex();
  DRIFT_RETURN_IF_ERROR(make_dir(store->folder_));
  store->index_folder();
  store->staging_.resize(size_t(config.staging_pages));
  for (int32_t i = 0; i < config.staging_pages; ++i) {
    store->staging_[size_t(i)].tokens.resize(size_t(config.page_size));
    store->staging_[size_t(i)].bytes.resize(config.page_bytes);
    store->free_slots_.push_back(i);
  }
  store->thread_ = std::thread([s = store.get()] { s->io_loop(); });
  return store;
}

KVDiskStore::~KVDiskStore() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    work_.notify_all();
    thread_.join();
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

Status KVDiskStore::lock_dir() {
  // Rule: one process per directory; a second is refused with the holder's pid.
  const std::string path = config_.dir + "/lock";
  lock_fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0)
    return make_error("kv cache dir: cannot open '{}': {}", path, std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {};
    (void)::pread(lock_fd_, pid, sizeof(pid) - 1, 0);
    ::close(lock_fd_);
    lock_fd_ = -1;
    return make_error(
        "kv cache dir '{}' is in use by another drift process (pid {}); give each server its "
        "own --kv-cache-dir",
        config_.dir, pid[0] ? std::string(pid, strnlen(pid, sizeof(pid))) : "unknown");
  }
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, pid.data(), pid.size(), 0) < 0)
    return make_error("kv cache dir: cannot write '{}': {}", path, std::strerror(errno));
  return Status::Ok();
}

Status KVDiskStore::load_secret() {
  // Rule: the secret is made once per directory and never changes (a new one would orphan every
  // page); it is written whole (temp file + rename) or not at all.
  const std::string path = config_.dir + "/secret";
  uint64_t secret[2] = {0, 0};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  bool have = false;
  if (fd >= 0) {
    struct stat st {};
    have = ::fstat(fd, &st) == 0 && st.st_size == sizeof(secret) &&
           read_exact(fd, secret, sizeof(secret), 0);
    ::close(fd);
  }
  if (!have) {
    std::random_device random;
    for (uint64_t& word : secret) word = (uint64_t(random()) << 32) ^ random();
    const std::string temp = fmt::format("{}.tmp.{}", path, ::getpid());
    const int out = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const bool written = out >= 0 && write_exact(out, secret, sizeof(secret));
    if (out >= 0) ::close(out);
    if (!written || ::rename(temp.c_str(), path.c_str()) != 0)
      return make_error("kv cache dir: cannot write '{}': {}", path, std::strerror(errno));
  }
  uint8_t seed_bytes[sizeof(KVDigest) + sizeof(secret)];
  std::memcpy(seed_bytes, &config_.fingerprint, sizeof(KVDigest));
  std::memcpy(seed_bytes + sizeof(KVDigest), secret, sizeof(secret));
  digest_seed_ = kv_digest_bytes(seed_bytes).lo;
  return Status::Ok();
}

void KVDiskStore::index_folder() {
  // Rule: headers only; whatever is not a whole page of this fingerprint is deleted.
  DIR* dir = ::opendir(folder_.c_str());
  if (dir == nullptr) return;
  struct Found {
    KVDigest name;
    KVDiskPageKey key;
    uint64_t bytes;
    int64_t mtime_ns;
    std::vector<TokenId> tokens;  // keep_pages_found, of a full group-0 page
  };
  std::vector<Found> found;
  const uint64_t expected_size =
      sizeof(PageFileHeader) + uint64_t(config_.page_size) * sizeof(TokenId) + config_.page_bytes;
  std::vector<TokenId> tokens(size_t(config_.page_size));
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    const std::string path = folder_ + "/" + name;
    if (name.rfind(kTempPrefix, 0) == 0) {  // a write a crash cut short
      ::unlink(path.c_str());
      ++stats_.files_dropped_at_start;
      continue;
    }
    if (name.size() != 32 + std::strlen(kSuffix) || !name.ends_with(kSuffix)) continue;
    PageFileHeader h{};
    struct stat st {};
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    bool good = fd >= 0 && ::fstat(fd, &st) == 0 && uint64_t(st.st_size) == expected_size &&
                read_exact(fd, &h, sizeof(h), 0) &&
                read_exact(fd, tokens.data(), tokens.size() * sizeof(TokenId), sizeof(h));
    if (fd >= 0) ::close(fd);
    good = good && std::memcmp(h.magic, kMagic, sizeof(kMagic)) == 0 && h.version == kVersion &&
           h.page_size == uint32_t(config_.page_size) && h.payload_bytes == config_.page_bytes &&
           h.fingerprint == config_.fingerprint &&
           h.header_checksum == header_checksum(h, tokens) && h.group < (1u << 30) &&
           name == kv_disk_name(h.digest, int32_t(h.group)).hex() + kSuffix;
    if (!good) {
      ::unlink(path.c_str());
      ++stats_.files_dropped_at_start;
      continue;
    }
    KVDiskPageKey key{h.digest,
                      h.parent,
                      h.cache_namespace,
                      h.hash,
                      h.has_parent_hash ? std::optional<uint64_t>(h.parent_hash) : std::nullopt,
                      tokens.back() == kPartialPagePadding,
                      int32_t(h.group)};
    const bool keep = config_.keep_pages_found && key.group == 0 && !key.partial;
    found.push_back({kv_disk_name(key.digest, key.group), key, uint64_t(st.st_size),
                     int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                     keep ? tokens : std::vector<TokenId>{}});
  }
  ::closedir(dir);
  // Least recently used first: a read touches a page's mtime.
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime_ns < b.mtime_ns; });
  std::lock_guard<std::mutex> lock(mutex_);
  for (Found& f : found) {
    lru_.push_back(f.name);
    index_[f.name] = Entry{f.key, f.bytes, std::prev(lru_.end())};
    stats_.pages += 1;
    stats_.bytes += f.bytes;
    if (!f.tokens.empty()) found_.push_back(KVDiskFoundPage{f.key, std::move(f.tokens)});
  }
  stats_.pages_indexed_at_start = found.size();
  enforce_budget_locked();  // what it drops is left out of found_ at take
}

std::vector<KVDiskFoundPage> KVDiskStore::take_pages_found_at_start() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<KVDiskFoundPage> found = std::move(found_);
  found_.clear();
  std::erase_if(found, [&](const KVDiskFoundPage& p) {
    return !index_.contains(kv_disk_name(p.key.digest, p.key.group));
  });
  return found;
}

std::string KVDiskStore::path_of(const KVDigest& name) const {
  return folder_ + "/" + name.hex() + kSuffix;
}

uint64_t KVDiskStore::file_bytes() const {
  return sizeof(PageFileHeader) + uint64_t(config_.page_size) * sizeof(TokenId) +
         config_.page_bytes;
}

bool KVDiskStore::write(const KVDiskPageKey& key, std::span<const TokenId> tokens,
                        std::span<const uint8_t> bytes, bool wait_for_slot) {
  if (tokens.empty() || tokens.size() > size_t(config_.page_size) ||
      bytes.size() != config_.page_bytes)
    return false;
  const KVDigest name = kv_disk_name(key.digest, key.group);
  std::unique_lock<std::mutex> lock(mutex_);
  if (auto it = index_.find(name); it != index_.end()) {
    lru_.splice(lru_.end(), lru_, it->second.lru);  // used again: most recent
    return false;
  }
  if (staged_slot_locked(name) >= 0) return false;  // queued already
  if (wait_for_slot) idle_.wait(lock, [&] { return !free_slots_.empty() || stopping_; });
  if (free_slots_.empty()) {
    ++stats_.writes_dropped;
    return false;
  }
  const int32_t slot = free_slots_.back();
  free_slots_.pop_back();
  Staged& staged = staging_[size_t(slot)];
  staged.queued = true;
  staged.name = name;
  staged.key = key;
  staged.key.partial = tokens.size() < staged.tokens.size();
  std::fill(std::copy(tokens.begin(), tokens.end(), staged.tokens.begin()), staged.tokens.end(),
            kPartialPagePadding);
  std::copy(bytes.begin(), bytes.end(), staged.bytes.begin());
  write_queue_.push_back(slot);
  lock.unlock();
  work_.notify_one();
  return true;
}

bool KVDiskStore::contains(const KVDigest& digest, const KVDigest& parent, uint64_t cache_namespace,
                           int32_t group) const {
  const KVDigest name = kv_disk_name(digest, group);
  std::lock_guard<std::mutex> lock(mutex_);
  auto matches = [&](const KVDiskPageKey& key) {
    return key.digest == digest && key.group == group && key.parent == parent &&
           key.cache_namespace == cache_namespace;
  };
  if (auto it = index_.find(name); it != index_.end()) return matches(it->second.key);
  const int32_t slot = staged_slot_locked(name);
  return slot >= 0 && matches(staging_[size_t(slot)].key);
}

bool KVDiskStore::holds(const KVDigest& digest, int32_t group) const {
  const KVDigest name = kv_disk_name(digest, group);
  std::lock_guard<std::mutex> lock(mutex_);
  return index_.contains(name) || staged_slot_locked(name) >= 0;
}

int32_t KVDiskStore::num_free_slots() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return int32_t(free_slots_.size());
}

int32_t KVDiskStore::staged_slot_locked(const KVDigest& name) const {
  // A handful of slots: a scan, and no allocation on the worker's eviction path.
  for (size_t i = 0; i < staging_.size(); ++i)
    if (staging_[i].queued && staging_[i].name == name) return int32_t(i);
  return -1;
}

uint64_t KVDiskStore::read(const KVDiskPageKey& key, std::span<const TokenId> tokens,
                           std::span<uint8_t> dest) {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t ticket = next_ticket_++;
  // A partial page's file pads its tokens; what tells it from a full page whose last token is
  // the padding (never a real token id) is the count the reader asks for.
  std::vector<TokenId> expected(size_t(config_.page_size), kPartialPagePadding);
  std::copy_n(tokens.begin(), std::min(tokens.size(), expected.size()), expected.begin());
  KVDiskPageKey expected_key = key;
  expected_key.partial = tokens.size() < expected.size();
  read_queue_.push_back(ReadJob{ticket, expected_key, std::move(expected), dest});
  lock.unlock();
  work_.notify_one();
  return ticket;
}

void KVDiskStore::take_completed(std::vector<std::pair<uint64_t, bool>>& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  out.insert(out.end(), completed_.begin(), completed_.end());
  completed_.clear();
}

void KVDiskStore::set_on_read_done(std::function<void()> callback) {
  std::lock_guard<std::mutex> lock(mutex_);
  on_read_done_ = std::move(callback);
}

void KVDiskStore::set_on_change(std::function<void(const KVDiskChange&)> callback) {
  std::lock_guard<std::mutex> lock(mutex_);
  on_change_ = std::move(callback);
}

void KVDiskStore::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return write_queue_.empty() && read_queue_.empty() && busy_ == 0; });
}

KVDiskStats KVDiskStore::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void KVDiskStore::io_loop() {
  // Rule: reads first (a request waits for them), then writes; on stop, finish everything queued.
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || !read_queue_.empty() || !write_queue_.empty(); });
    if (!read_queue_.empty()) {
      ReadJob job = std::move(read_queue_.front());
      read_queue_.pop_front();
      ++busy_;
      lock.unlock();
      const bool ok = read_page(job);
      lock.lock();
      --busy_;
      completed_.emplace_back(job.ticket, ok);
      std::function<void()> done = on_read_done_;
      lock.unlock();
      if (done) done();
      lock.lock();
      idle_.notify_all();
      continue;
    }
    if (!write_queue_.empty()) {
      const int32_t slot = write_queue_.front();
      write_queue_.pop_front();
      ++busy_;
      lock.unlock();
      write_page(staging_[size_t(slot)]);
      lock.lock();
      --busy_;
      staging_[size_t(slot)].queued = false;
      free_slots_.push_back(slot);
      idle_.notify_all();
      continue;
    }
    if (stopping_) return;
  }
}

void KVDiskStore::write_page(Staged& staged) {
  // Rule: a page is visible only once whole — temp file, then rename; then the budget holds.
  const KVDiskPageKey& key = staged.key;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (index_.contains(staged.name)) return;
  }
  const auto start = std::chrono::steady_clock::now();
  PageFileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.page_size = uint32_t(config_.page_size);
  h.payload_bytes = config_.page_bytes;
  h.fingerprint = config_.fingerprint;
  h.digest = key.digest;
  h.parent = key.parent;
  h.cache_namespace = key.cache_namespace;
  h.hash = key.hash;
  h.parent_hash = key.parent_hash.value_or(0);
  h.has_parent_hash = key.parent_hash.has_value();
  h.group = uint32_t(key.group);
  h.payload_checksum = kv_checksum(staged.bytes);
  h.header_checksum = header_checksum(h, staged.tokens);
  const std::string path = path_of(staged.name);
  const std::string temp =
      fmt::format("{}/{}{}.{}", folder_, kTempPrefix, staged.name.hex(), ::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && write_exact(fd, &h, sizeof(h)) &&
            write_exact(fd, staged.tokens.data(), staged.tokens.size() * sizeof(TokenId)) &&
            write_exact(fd, staged.bytes.data(), staged.bytes.size());
  if (fd >= 0) ok = (::close(fd) == 0) && ok;
  ok = ok && ::rename(temp.c_str(), path.c_str()) == 0;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!ok) {
    ::unlink(temp.c_str());
    ++stats_.write_errors;
    return;
  }
  lru_.push_back(staged.name);
  index_[staged.name] = Entry{key, file_bytes(), std::prev(lru_.end())};
  stats_.pages += 1;
  stats_.bytes += file_bytes();
  stats_.pages_written += 1;
  stats_.bytes_written += file_bytes();
  stats_.write_seconds += seconds_since(start);
  if (on_change_) on_change_(KVDiskChange{true, key, staged.tokens});
  enforce_budget_locked();
}

bool KVDiskStore::read_page(const ReadJob& job) {
  // Rule: a page is used only if every byte checks: the header names exactly the page the
  // reader verified (digest, parent, namespace, tokens) and the payload has its checksum.
  const auto start = std::chrono::steady_clock::now();
  const KVDigest name = kv_disk_name(job.key.digest, job.key.group);
  int32_t slot = -1;
  {
    // Only this thread frees a queued slot, so it stays put while we copy from it.
    std::lock_guard<std::mutex> lock(mutex_);
    slot = staged_slot_locked(name);
  }
  if (slot >= 0) {
    const bool ok = read_staged(job, staging_[size_t(slot)]);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ok) {
      ++stats_.read_failures;
      return false;
    }
    stats_.pages_read += 1;
    stats_.bytes_read += config_.page_bytes;
    stats_.read_seconds += seconds_since(start);
    return true;
  }
  const std::string path = path_of(name);
  PageFileHeader h{};
  std::vector<TokenId> tokens(size_t(config_.page_size));
  struct stat st {};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  bool ok = fd >= 0 && ::fstat(fd, &st) == 0 && uint64_t(st.st_size) == file_bytes() &&
            job.dest.size() == config_.page_bytes && read_exact(fd, &h, sizeof(h), 0) &&
            read_exact(fd, tokens.data(), tokens.size() * sizeof(TokenId), sizeof(h));
  ok = ok && std::memcmp(h.magic, kMagic, sizeof(kMagic)) == 0 && h.version == kVersion &&
       h.page_size == uint32_t(config_.page_size) && h.payload_bytes == config_.page_bytes &&
       h.fingerprint == config_.fingerprint && h.digest == job.key.digest &&
       h.parent == job.key.parent && h.cache_namespace == job.key.cache_namespace &&
       h.group == uint32_t(job.key.group) && h.header_checksum == header_checksum(h, tokens) &&
       tokens == job.tokens && (tokens.back() == kPartialPagePadding) == job.key.partial;
  ok = ok && read_exact(fd, job.dest.data(), job.dest.size(),
                        off_t(sizeof(h) + tokens.size() * sizeof(TokenId)));
  ok = ok && kv_checksum(job.dest) == h.payload_checksum;
  if (fd >= 0) {
    if (ok) ::futimens(fd, nullptr);  // recently used, for the LRU order after a restart
    ::close(fd);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(name);
  if (!ok) {
    ++stats_.read_failures;
    if (it != index_.end()) {
      drop_locked(name, false);
    } else {
      ::unlink(path.c_str());
    }
    return false;
  }
  if (it != index_.end()) lru_.splice(lru_.end(), lru_, it->second.lru);
  stats_.pages_read += 1;
  stats_.bytes_read += config_.page_bytes;
  stats_.read_seconds += seconds_since(start);
  return true;
}

bool KVDiskStore::read_staged(const ReadJob& job, const Staged& staged) {
  // The same checks as a file's, but the bytes never left memory.
  if (staged.key.digest != job.key.digest || staged.key.group != job.key.group ||
      staged.key.parent != job.key.parent ||
      staged.key.cache_namespace != job.key.cache_namespace || staged.tokens != job.tokens ||
      staged.key.partial != job.key.partial || job.dest.size() != staged.bytes.size())
    return false;
  std::copy(staged.bytes.begin(), staged.bytes.end(), job.dest.begin());
  return true;
}

void KVDiskStore::drop_locked(const KVDigest& name, bool evicted) {
  auto it = index_.find(name);
  if (it == index_.end()) return;
  ::unlink(path_of(name).c_str());
  stats_.pages -= 1;
  stats_.bytes -= it->second.file_bytes;
  stats_.pages_evicted += evicted;
  const KVDiskPageKey key = it->second.key;
  lru_.erase(it->second.lru);
  index_.erase(it);
  if (on_change_) on_change_(KVDiskChange{false, key, {}});
}

void KVDiskStore::enforce_budget_locked() {
  while (stats_.bytes > config_.budget_bytes && !lru_.empty()) drop_locked(lru_.front(), true);
}

}  // namespace drift
