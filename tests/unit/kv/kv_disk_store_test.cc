// The disk tier's store on its own: pages written and read back bit for bit, found again after a
// restart, and every way a file can be wrong (corrupt, truncated, a crash's temp file, another
// model's) dropped and never used; one process per directory; the budget by least recent use.
#include "kv/kv_disk_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

namespace drift {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kPageSize = 4;
constexpr uint64_t kPageBytes = 64;

struct TempDir {
  fs::path path;
  TempDir() {
    char pattern[] = "/tmp/drift-kv-disk-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() { fs::remove_all(path); }
};

KVDiskStoreConfig config_of(const fs::path& dir, KVDigest fingerprint = {1, 2},
                            uint64_t budget = 1 << 20) {
  KVDiskStoreConfig c;
  c.dir = dir.string();
  c.budget_bytes = budget;
  c.fingerprint = fingerprint;
  c.page_size = kPageSize;
  c.page_bytes = kPageBytes;
  return c;
}

std::unique_ptr<KVDiskStore> open_store(const KVDiskStoreConfig& c) {
  auto store = KVDiskStore::open(c);
  EXPECT_TRUE(store.ok()) << (store.ok() ? "" : store.error().message);
  return store.ok() ? std::move(store).value() : nullptr;
}

// Page `n`: its key chains from the page before (n - 1), its tokens and bytes derive from n.
struct TestPage {
  KVDiskPageKey key;
  std::vector<TokenId> tokens;
  std::vector<uint8_t> bytes;
};
TestPage page(int n) {
  TestPage p;
  p.tokens = {TokenId(10 * n), TokenId(10 * n + 1), TokenId(10 * n + 2), TokenId(10 * n + 3)};
  p.key.parent = n == 0 ? kv_digest_root(7, 99) : page(n - 1).key.digest;
  p.key.digest = kv_digest_next(p.key.parent, p.tokens);
  p.key.cache_namespace = 7;
  p.key.hash = uint64_t(n) * 1000 + 1;
  p.bytes.resize(kPageBytes);
  std::iota(p.bytes.begin(), p.bytes.end(), uint8_t(n * 3));
  return p;
}

// Reads page `p` and waits for the answer.
bool read_back(KVDiskStore& store, const TestPage& p, std::vector<uint8_t>& out) {
  out.assign(kPageBytes, 0);
  const uint64_t ticket = store.read(p.key, p.tokens, out);
  store.drain();
  std::vector<std::pair<uint64_t, bool>> done;
  store.take_completed(done);
  EXPECT_EQ(done.size(), 1u);
  return done.size() == 1 && done[0].first == ticket && done[0].second;
}

fs::path file_of(const KVDiskStore& store, const TestPage& p) {
  return fs::path(store.folder()) / (p.key.digest.hex() + ".kvp");
}

TEST(KVDiskStore, APageReadsBackBitForBitAlsoAfterARestart) {
  TempDir dir;
  TestPage p = page(0);
  {
    auto store = open_store(config_of(dir.path));
    ASSERT_TRUE(store);
    EXPECT_FALSE(store->contains(p.key.digest, p.key.parent, 7));
    ASSERT_TRUE(store->write(p.key, p.tokens, p.bytes));
    store->drain();
    EXPECT_TRUE(store->contains(p.key.digest, p.key.parent, 7));
    EXPECT_FALSE(store->contains(p.key.digest, p.key.parent, 8)) << "another namespace";
    EXPECT_FALSE(store->contains(p.key.digest, p.key.digest, 7)) << "another parent";
    EXPECT_FALSE(store->write(p.key, p.tokens, p.bytes)) << "on disk already";
    std::vector<uint8_t> out;
    ASSERT_TRUE(read_back(*store, p, out));
    EXPECT_EQ(out, p.bytes);
    const KVDiskStats s = store->stats();
    EXPECT_EQ(s.pages, 1u);
    EXPECT_EQ(s.bytes, store->file_bytes());
    EXPECT_EQ(s.pages_written, 1u);
    EXPECT_EQ(s.pages_read, 1u);
    EXPECT_EQ(s.bytes_read, kPageBytes);
  }
  auto store = open_store(config_of(dir.path));
  ASSERT_TRUE(store);
  EXPECT_EQ(store->stats().pages_indexed_at_start, 1u);
  EXPECT_TRUE(store->contains(p.key.digest, p.key.parent, 7));
  std::vector<uint8_t> out;
  ASSERT_TRUE(read_back(*store, p, out));
  EXPECT_EQ(out, p.bytes);
}

TEST(KVDiskStore, ASecondProcessOnTheDirectoryIsRefusedByName) {
  TempDir dir;
  auto first = open_store(config_of(dir.path));
  ASSERT_TRUE(first);
  // flock locks an open file description: a second open in this process conflicts as another
  // process's would.
  auto second = KVDiskStore::open(config_of(dir.path, {3, 4}));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("is in use by another drift process (pid " +
                                        std::to_string(getpid()) + ")"),
            std::string::npos)
      << second.error().message;
  first.reset();
  EXPECT_TRUE(KVDiskStore::open(config_of(dir.path)).ok()) << "the lock goes with its holder";
}

TEST(KVDiskStore, ACorruptPayloadFailsItsReadAndIsDeleted) {
  TempDir dir;
  auto store = open_store(config_of(dir.path));
  TestPage p = page(1);
  ASSERT_TRUE(store->write(p.key, p.tokens, p.bytes));
  store->drain();
  {
    std::fstream f(file_of(*store, p), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put(char(0x5A));
  }
  std::vector<uint8_t> out;
  EXPECT_FALSE(read_back(*store, p, out));
  EXPECT_FALSE(fs::exists(file_of(*store, p)));
  EXPECT_FALSE(store->contains(p.key.digest, p.key.parent, 7));
  EXPECT_EQ(store->stats().read_failures, 1u);
  EXPECT_EQ(store->stats().pages, 0u);
}

TEST(KVDiskStore, AReadMustFindTheTokensAndParentItVerified) {
  TempDir dir;
  auto store = open_store(config_of(dir.path));
  TestPage p = page(2);
  ASSERT_TRUE(store->write(p.key, p.tokens, p.bytes));
  store->drain();
  TestPage other_tokens = p;
  other_tokens.tokens[3] += 1;
  std::vector<uint8_t> out;
  EXPECT_FALSE(read_back(*store, other_tokens, out));
  ASSERT_TRUE(store->write(p.key, p.tokens, p.bytes));
  store->drain();
  TestPage other_parent = p;
  other_parent.key.parent = page(0).key.digest;
  EXPECT_FALSE(read_back(*store, other_parent, out));
  EXPECT_EQ(store->stats().read_failures, 2u);
}

TEST(KVDiskStore, TruncatedFilesAndACrashsTempFilesAreCleanedAtStart) {
  TempDir dir;
  TestPage a = page(0), b = page(1), c = page(2);
  std::string folder;
  {
    auto store = open_store(config_of(dir.path));
    for (const TestPage* p : {&a, &b, &c}) ASSERT_TRUE(store->write(p->key, p->tokens, p->bytes));
    store->drain();
    folder = store->folder();
    fs::resize_file(file_of(*store, b), store->file_bytes() - 5);  // cut short
    // A kill -9 in the middle of a write leaves its temp file, partly written.
    std::ofstream(fs::path(folder) / ("tmp-" + c.key.digest.hex() + ".12345"), std::ios::binary)
        << "DRIFTKV";
    // A header whose bytes changed: its checksum fails.
    std::fstream f(file_of(*store, c), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(60);
    f.put(char(0x7F));
  }
  auto store = open_store(config_of(dir.path));
  const KVDiskStats s = store->stats();
  EXPECT_EQ(s.pages_indexed_at_start, 1u);
  EXPECT_EQ(s.files_dropped_at_start, 3u);
  EXPECT_TRUE(store->contains(a.key.digest, a.key.parent, 7));
  EXPECT_FALSE(store->contains(b.key.digest, b.key.parent, 7));
  EXPECT_FALSE(store->contains(c.key.digest, c.key.parent, 7));
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(folder)) files += e.is_regular_file();
  EXPECT_EQ(files, 1u) << "only the whole page is left";
  std::vector<uint8_t> out;
  ASSERT_TRUE(read_back(*store, a, out));
  EXPECT_EQ(out, a.bytes);
}

TEST(KVDiskStore, AnotherModelsPagesAreNeverRead) {
  TempDir dir;
  TestPage p = page(0);
  fs::path foreign_file;
  {
    auto store = open_store(config_of(dir.path, {1, 2}));
    ASSERT_TRUE(store->write(p.key, p.tokens, p.bytes));
    store->drain();
    foreign_file = file_of(*store, p);
  }
  auto store = open_store(config_of(dir.path, {5, 6}));
  EXPECT_EQ(store->stats().pages_indexed_at_start, 0u) << "a folder per fingerprint";
  EXPECT_FALSE(store->contains(p.key.digest, p.key.parent, 7));
  store.reset();
  // Even copied into this model's folder, the header's fingerprint gives it away.
  fs::copy_file(foreign_file, dir.path / KVDigest{5, 6}.hex() / foreign_file.filename());
  store = open_store(config_of(dir.path, {5, 6}));
  EXPECT_EQ(store->stats().files_dropped_at_start, 1u);
  EXPECT_FALSE(store->contains(p.key.digest, p.key.parent, 7));
  EXPECT_TRUE(fs::exists(foreign_file)) << "the other model's folder is left alone";
}

TEST(KVDiskStore, TheBudgetDeletesTheLeastRecentlyUsedPage) {
  TempDir dir;
  KVDiskStoreConfig c = config_of(dir.path);
  {
    auto probe = open_store(c);
    c.budget_bytes = 3 * probe->file_bytes();
  }
  auto store = open_store(c);
  std::vector<TestPage> pages = {page(0), page(1), page(2), page(3)};
  // File times may be as coarse as a clock tick: space the uses out so a restart sees the order.
  auto tick = [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(store->write(pages[i].key, pages[i].tokens, pages[i].bytes));
    store->drain();
    tick();
  }
  std::vector<uint8_t> out;
  ASSERT_TRUE(read_back(*store, pages[0], out));  // page 0 used again: page 1 is the oldest
  tick();
  ASSERT_TRUE(store->write(pages[3].key, pages[3].tokens, pages[3].bytes));
  store->drain();
  const KVDiskStats s = store->stats();
  EXPECT_EQ(s.pages, 3u);
  EXPECT_LE(s.bytes, c.budget_bytes);
  EXPECT_EQ(s.pages_evicted, 1u);
  EXPECT_TRUE(store->contains(pages[0].key.digest, pages[0].key.parent, 7));
  EXPECT_FALSE(store->contains(pages[1].key.digest, pages[1].key.parent, 7));
  EXPECT_FALSE(fs::exists(file_of(*store, pages[1])));
  EXPECT_TRUE(store->contains(pages[3].key.digest, pages[3].key.parent, 7));

  // A restart keeps the order (reads touch the file) and a smaller budget trims at once.
  store.reset();
  c.budget_bytes = 2 * c.budget_bytes / 3;
  store = open_store(c);
  EXPECT_EQ(store->stats().pages, 2u);
  EXPECT_FALSE(store->contains(pages[2].key.digest, pages[2].key.parent, 7));
}

// Write-ahead asks whether a page is held (on disk or staged) before it copies one: asking
// changes no page's place in the budget's order, and the free staging slots come back as the
// I/O thread writes them.
TEST(KVDiskStore, HoldsAsksWithoutMakingAPageRecent) {
  TempDir dir;
  KVDiskStoreConfig c = config_of(dir.path);
  {
    auto probe = open_store(c);
    c.budget_bytes = 2 * probe->file_bytes();
  }
  c.staging_pages = 3;
  auto store = open_store(c);
  std::vector<TestPage> pages = {page(0), page(1), page(2)};
  EXPECT_EQ(store->num_free_slots(), 3);
  EXPECT_FALSE(store->holds(pages[0].key.digest));
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(store->write(pages[i].key, pages[i].tokens, pages[i].bytes));
    EXPECT_TRUE(store->holds(pages[i].key.digest)) << "staged or written";
    store->drain();
  }
  EXPECT_EQ(store->num_free_slots(), 3);
  EXPECT_TRUE(store->holds(pages[0].key.digest));  // not a use: page 0 stays the oldest
  ASSERT_TRUE(store->write(pages[2].key, pages[2].tokens, pages[2].bytes));
  store->drain();
  EXPECT_FALSE(store->holds(pages[0].key.digest)) << "the budget deleted the oldest";
  EXPECT_TRUE(store->holds(pages[1].key.digest));
  EXPECT_TRUE(store->holds(pages[2].key.digest));
}

TEST(KVDiskStore, ChangesAreReportedForKVEvents) {
  TempDir dir;
  KVDiskStoreConfig c = config_of(dir.path);
  auto store = open_store(c);
  std::vector<std::pair<bool, uint64_t>> changes;
  store->set_on_change(
      [&](const KVDiskChange& change) { changes.emplace_back(change.stored, change.key.hash); });
  TestPage p = page(4);
  ASSERT_TRUE(store->write(p.key, p.tokens, p.bytes));
  store->drain();
  p.tokens[0] += 1;  // the read finds other tokens: the page is dropped
  std::vector<uint8_t> out;
  EXPECT_FALSE(read_back(*store, p, out));
  EXPECT_EQ(changes, (std::vector<std::pair<bool, uint64_t>>{{true, 4001}, {false, 4001}}));
}

}  // namespace
}  // namespace drift

namespace drift {
namespace {

// A swapped-out sequence's last page holds fewer tokens than a page: it is stored padded, named
// by the digest of its own tokens, read back only by a reader expecting exactly those tokens,
// and marked partial (no prefix block for KV events), also when indexed after a restart.
TEST(KVDiskStore, APartialPageReadsBackOnlyForItsOwnTokens) {
  TempDir dir;
  TestPage p = page(2);
  p.tokens.resize(3);
  p.key.digest = kv_digest_next(p.key.parent, p.tokens);
  {
    auto store = open_store(config_of(dir.path));
    ASSERT_TRUE(store);
    std::vector<bool> partial;
    store->set_on_change([&](const KVDiskChange& c) { partial.push_back(c.key.partial); });
    ASSERT_TRUE(store->write(p.key, p.tokens, p.bytes));
    store->drain();
    EXPECT_EQ(partial, std::vector<bool>{true});
    EXPECT_EQ(fs::file_size(file_of(*store, p)), store->file_bytes()) << "one file size for all";
    std::vector<uint8_t> out;
    ASSERT_TRUE(read_back(*store, p, out));
    EXPECT_EQ(out, p.bytes);
  }
  auto store = open_store(config_of(dir.path));
  ASSERT_TRUE(store);
  std::vector<KVDiskChange> removed;
  store->set_on_change([&](const KVDiskChange& c) { removed.push_back(c); });
  TestPage longer = p;
  longer.tokens.push_back(kPartialPagePadding);  // what the file holds after the three tokens
  std::vector<uint8_t> out;
  EXPECT_FALSE(read_back(*store, longer, out)) << "a reader of four tokens never gets it";
  ASSERT_EQ(removed.size(), 1u) << "the failed read dropped it";
  EXPECT_TRUE(removed[0].key.partial) << "indexed at start as partial";
  EXPECT_FALSE(store->write(p.key, std::span<const TokenId>(), p.bytes)) << "no tokens at all";
}

// A sliding-window group's page of a row has the row's digest, parent and tokens and bytes of its
// own: it is its own file, named by (digest, group), and a read or a lookup of another group never
// finds it.
TEST(KVDiskStore, APageOfAnotherKVGroupIsAFileOfItsOwn) {
  TempDir dir;
  TestPage p = page(2);
  TestPage sliding = p;
  sliding.key.group = 2;
  std::reverse(sliding.bytes.begin(), sliding.bytes.end());
  {
    auto store = open_store(config_of(dir.path));
    ASSERT_TRUE(store->write(p.key, p.tokens, p.bytes));
    ASSERT_TRUE(store->write(sliding.key, sliding.tokens, sliding.bytes));
    store->drain();
    EXPECT_TRUE(store->contains(p.key.digest, p.key.parent, 7, 2));
    EXPECT_FALSE(store->contains(p.key.digest, p.key.parent, 7, 1));
    EXPECT_TRUE(store->holds(p.key.digest, 2));
    EXPECT_FALSE(store->holds(p.key.digest, 1));
    EXPECT_TRUE(
        fs::exists(fs::path(store->folder()) / (kv_disk_name(p.key.digest, 2).hex() + ".kvp")));
    EXPECT_NE(kv_disk_name(p.key.digest, 2), kv_digest_next(p.key.digest, {{2}}))
        << "never the name of a page of tokens";
  }
  KVDiskStoreConfig c = config_of(dir.path);
  c.keep_pages_found = true;
  auto store = open_store(c);
  EXPECT_EQ(store->stats().pages_indexed_at_start, 2u);
  std::vector<uint8_t> out;
  ASSERT_TRUE(read_back(*store, sliding, out));
  EXPECT_EQ(out, sliding.bytes);
  ASSERT_TRUE(read_back(*store, p, out));
  EXPECT_EQ(out, p.bytes);
  TestPage wrong_group = sliding;
  wrong_group.key.group = 1;
  out.assign(kPageBytes, 0);
  store->read(wrong_group.key, wrong_group.tokens, out);
  store->drain();
  std::vector<std::pair<uint64_t, bool>> done;
  store->take_completed(done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_FALSE(done[0].second) << "no page of group 1 there";
  // Found at start, for routers: the group-0 page only (a router matches text, one page of it).
  const std::vector<KVDiskFoundPage> found = store->take_pages_found_at_start();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].key.digest, p.key.digest);
  EXPECT_EQ(found[0].key.hash, p.key.hash);
  EXPECT_EQ(found[0].tokens, p.tokens);
  EXPECT_TRUE(store->take_pages_found_at_start().empty()) << "handed over once";
}

}  // namespace
}  // namespace drift
