// The disk tier over sliding-window KV groups (kv/prefix_disk_tier.h), with the fake executor
// whose reads check every group's window against the reader's history and group: a page read back
// into the wrong group, position or prefix fails. One full-attention group and two sliding groups
// of window 6 (two pages of 4 seen by a query at a page boundary): a re-asked document reads its
// group-0 rows and only its last window's sliding pages back; damaged, truncated or misplaced
// sliding pages only cost recomputing, a missing one cuts the run back to where the windows are
// whole, the budget holds, and a swapped hybrid sequence answers as alone.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "tiered_driver.h"

namespace drift {
namespace {

namespace fs = std::filesystem;
using testing::prompt_of;
using testing::TempDir;
using testing::TieredDriver;

const std::vector<KVGroup> kGroups = {KVGroup{}, KVGroup{6}, KVGroup{6}};
constexpr int32_t kHybridPages = 40;
const std::vector<TokenId> kDocument = prompt_of(29, 100);  // 7 full rows + 1 token

TieredDriver hybrid(const fs::path& dir, uint64_t budget = 1 << 20,
                    const SchedulerConfig& c = testing::config(), KVDigest fingerprint = {11, 22}) {
  return TieredDriver(dir, fingerprint, budget, 16, c, kGroups, kHybridPages);
}

// Prompts that need the pool between them, so that every page of the document is evicted.
void crowd_out(TieredDriver& d, SeqId first_id) {
  for (int i = 0; i < 3; ++i) d.ask(first_id + i, prompt_of(40, 500 + 200 * i));
}

// The rows of `tokens` a RAM lookup would hit now.
int32_t ram_hit_rows(TieredDriver& d, const std::vector<TokenId>& tokens) {
  std::vector<PageId> pages;
  return d.prefix()
      .lookup(0, tokens, int32_t(tokens.size() - 1) / testing::kPageSize, pages)
      .num_pages;
}

// A page file's KV group and first token (the header's group field, then the token ids).
struct PageFile {
  fs::path path;
  int32_t group = 0;
  TokenId first_token = 0;
};
std::vector<PageFile> page_files(const fs::path& dir) {
  std::vector<PageFile> files;
  for (const auto& folder : fs::directory_iterator(dir)) {
    if (!folder.is_directory()) continue;
    for (const auto& file : fs::directory_iterator(folder.path())) {
      if (file.path().extension() != ".kvp") continue;
      std::ifstream f(file.path(), std::ios::binary);
      char header[124];
      f.read(header, sizeof(header));
      PageFile p{file.path()};
      std::memcpy(&p.group, header + 100, sizeof(int32_t));  // after has_parent_hash
      std::memcpy(&p.first_token, header + 120, sizeof(TokenId));
      files.push_back(p);
    }
  }
  return files;
}

// The document's first life: computed, then every page crowded out of RAM onto the disk.
void first_life(const fs::path& dir) {
  TieredDriver d = hybrid(dir);
  EXPECT_EQ(d.ask(1, kDocument), d.reference(1, kDocument));
  crowd_out(d, 10);
  EXPECT_EQ(ram_hit_rows(d, kDocument), 0);
}

TEST(HybridDiskTier, EvictedRowsAreReadBackWithTheLastWindowOnly) {
  TempDir dir;
  TieredDriver d = hybrid(dir.path);
  EXPECT_EQ(d.ask(1, kDocument), d.reference(1, kDocument));
  crowd_out(d, 10);
  d.store().drain();
  ASSERT_EQ(ram_hit_rows(d, kDocument), 0) << "every row of the document left RAM";
  int sliding_files = 0;
  for (const PageFile& f : page_files(dir.path)) sliding_files += f.group != 0;
  EXPECT_GT(sliding_files, 0) << "sliding pages are spilled too";

  const uint64_t hit_before = d.prefix().stats().hit_tokens;
  EXPECT_EQ(d.ask(2, kDocument), d.reference(2, kDocument));
  EXPECT_EQ(d.tier().stats().loads, 1u);
  // 7 group-0 rows, and of each sliding group the 2 pages a query at position 28 sees.
  EXPECT_EQ(d.tier().stats().pages_loaded, 7u + 2 * 2);
  EXPECT_EQ(d.tier().stats().pages_load_failed, 0u);
  EXPECT_EQ(d.prefix().stats().hit_tokens - hit_before, 28u);
  EXPECT_TRUE(d.kv().check_invariants().ok());
  EXPECT_TRUE(d.prefix().check_invariants().ok());
}

TEST(HybridDiskTier, ARestartReadsTheRowsBack) {
  TempDir dir;
  first_life(dir.path);
  TieredDriver second = hybrid(dir.path);
  EXPECT_GE(second.store().stats().pages_indexed_at_start, 11u);
  EXPECT_EQ(second.ask(2, kDocument), second.reference(2, kDocument));
  EXPECT_EQ(second.tier().stats().pages_loaded, 11u);
  EXPECT_EQ(second.prefix().stats().hit_tokens, 28u);
}

TEST(HybridDiskTier, GroupZeroRowsInRamJoinSlidingPagesFromDisk) {
  // A longer prompt continues the document: it shares the document's rows and drops their
  // sliding pages from its window long before it releases their group-0 pages, so the pool
  // reclaims those sliding pages first. The document asked again holds its group-0 rows from
  // RAM and reads only its window's sliding pages from disk.
  TempDir dir;
  TieredDriver d = hybrid(dir.path);
  d.ask(1, kDocument);
  std::vector<TokenId> longer(kDocument.begin(), kDocument.begin() + 28);
  for (TokenId t : prompt_of(12, 900)) longer.push_back(t);
  d.ask(3, longer);
  ASSERT_TRUE(d.kv().open(99, 40 * testing::kPageSize).ok());  // takes pages row by row
  while (ram_hit_rows(d, kDocument) > 0)
    ASSERT_TRUE(d.kv().append(99, testing::kPageSize).has_value());
  d.kv().release(99);
  d.store().drain();
  std::vector<PageId> chain;
  ASSERT_EQ(d.prefix().match(d.prefix().root(0), kDocument, 7, chain).num_pages, 7)
      << "group 0's rows are all in RAM";
  const uint64_t hit_before = d.prefix().stats().hit_tokens;
  EXPECT_EQ(d.ask(2, kDocument), d.reference(2, kDocument));
  EXPECT_EQ(d.prefix().stats().hit_tokens - hit_before, 28u);
  EXPECT_EQ(d.tier().stats().loads, 1u);
  // What the pool took of the windows' 4 pages, and nothing of group 0.
  EXPECT_GE(d.tier().stats().pages_loaded, 1u);
  EXPECT_LE(d.tier().stats().pages_loaded, 2u * 2);
}

template <typename Damage>
void damage_sliding_files(const fs::path& dir, Damage damage) {
  int damaged = 0;
  for (const PageFile& f : page_files(dir))
    if (f.group != 0) damage(f), ++damaged;
  EXPECT_GT(damaged, 0);
}

TEST(HybridDiskTier, CorruptSlidingPagesAreRecomputedNeverUsed) {
  TempDir dir;
  first_life(dir.path);
  damage_sliding_files(dir.path, [](const PageFile& f) { testing::flip_last_byte(f.path); });
  TieredDriver second = hybrid(dir.path);
  EXPECT_EQ(second.ask(2, kDocument), second.reference(2, kDocument));
  EXPECT_EQ(second.tier().stats().pages_load_failed, 4u) << "the windows' pages read bad";
  EXPECT_EQ(second.prefix().stats().hit_tokens, 0u) << "no window whole: computed";
  EXPECT_GE(second.store().stats().read_failures, 4u);
}

TEST(HybridDiskTier, TruncatedSlidingPagesAreDroppedAtStartAndRecomputed) {
  TempDir dir;
  first_life(dir.path);
  damage_sliding_files(
      dir.path, [](const PageFile& f) { fs::resize_file(f.path, fs::file_size(f.path) / 2); });
  TieredDriver second = hybrid(dir.path);
  EXPECT_GE(second.store().stats().files_dropped_at_start, 4u);
  EXPECT_EQ(second.ask(2, kDocument), second.reference(2, kDocument));
  EXPECT_EQ(second.tier().stats().loads, 0u) << "no run of rows has its windows";
  EXPECT_EQ(second.prefix().stats().hit_tokens, 0u);
}

TEST(HybridDiskTier, APageOfAnotherGroupUnderASlidingPagesNameIsNeverUsed) {
  TempDir dir;
  first_life(dir.path);
  // Each group-1 file of the document takes the bytes of the group-2 file of the same row.
  std::map<TokenId, fs::path> group2;
  for (const PageFile& f : page_files(dir.path))
    if (f.group == 2) group2[f.first_token] = f.path;
  int swapped = 0;
  for (const PageFile& f : page_files(dir.path)) {
    if (f.group != 1 || !group2.contains(f.first_token)) continue;
    fs::copy_file(group2[f.first_token], f.path, fs::copy_options::overwrite_existing);
    ++swapped;
  }
  ASSERT_GT(swapped, 0);
  TieredDriver second = hybrid(dir.path);
  EXPECT_GE(second.store().stats().files_dropped_at_start, uint64_t(swapped))
      << "a file whose name is not its group's";
  EXPECT_EQ(second.ask(2, kDocument), second.reference(2, kDocument));
  EXPECT_EQ(second.prefix().stats().hit_tokens, 0u);
}

TEST(HybridDiskTier, AMissingSlidingPageCutsTheRunBackToWhereTheWindowsAreWhole) {
  TempDir dir;
  first_life(dir.path);
  // Row 6's page of group 2 (tokens 124..127): a resume after 7 rows needs it; one after 6 rows
  // needs rows 4 and 5 only, which are there.
  int removed = 0;
  for (const PageFile& f : page_files(dir.path))
    if (f.group == 2 && f.first_token == kDocument[24]) removed += fs::remove(f.path);
  ASSERT_EQ(removed, 1);
  TieredDriver second = hybrid(dir.path);
  EXPECT_EQ(second.ask(2, kDocument), second.reference(2, kDocument));
  EXPECT_EQ(second.prefix().stats().hit_tokens, 24u);
  EXPECT_EQ(second.tier().stats().pages_loaded, 6u + 2 * 2);
  EXPECT_EQ(second.tier().stats().pages_load_failed, 0u);
}

TEST(HybridDiskTier, TheBudgetHoldsWhileRowsSpill) {
  uint64_t file_bytes = 0;
  {
    TempDir probe;
    file_bytes = hybrid(probe.path).store().file_bytes();
  }
  TempDir dir;
  TieredDriver d = hybrid(dir.path, 10 * file_bytes);
  d.ask(1, kDocument);
  crowd_out(d, 10);
  d.store().drain();
  const KVDiskStats s = d.store().stats();
  EXPECT_LE(s.bytes, 10 * file_bytes);
  EXPECT_EQ(s.pages, 10u);
  EXPECT_EQ(s.pages_evicted, s.pages_written - 10);
  EXPECT_EQ(d.ask(2, kDocument), d.reference(2, kDocument));
}

TEST(HybridDiskTier, ASwappedHybridSequenceAnswersAsAlone) {
  // Two requests of 20 + 24 tokens need more than 28 pages of three groups together: the later
  // is preempted mid-decode, its live pages and partial last row swapped out and read back.
  SchedulerConfig c = testing::config();
  c.admission = AdmissionMode::kOptimistic;
  c.preemption = PreemptionPolicy::kSwap;
  TempDir dir;
  TieredDriver d(dir.path, KVDigest{11, 22}, 1 << 20, 16, c, kGroups, 28);
  std::vector<SequenceRequest> requests(2);
  for (int i = 0; i < 2; ++i) {
    requests[size_t(i)].id = SeqId(i + 1);
    requests[size_t(i)].prompt = prompt_of(20, 100 + 200 * i);
    requests[size_t(i)].max_new_tokens = 24;
  }
  std::map<SeqId, std::vector<TokenId>> out = d.run_together(requests);
  EXPECT_EQ(out[1], d.reference(1, prompt_of(20, 100), 24));
  EXPECT_EQ(out[2], d.reference(2, prompt_of(20, 300), 24));
  const SchedulerStats& s = d.scheduler().stats();
  ASSERT_GE(d.scheduler().capacity_stats().preempted, 1u);
  EXPECT_EQ(s.preemptions_swapped, d.scheduler().capacity_stats().preempted);
  EXPECT_EQ(d.tier().stats().pages_load_failed, 0u);
  EXPECT_EQ(d.store().stats().writes_dropped, 0u);
  EXPECT_EQ(d.tier().stats().tails_loaded, d.tier().stats().tails_swapped_out);
  EXPECT_EQ(s.swapped_tails_restored, d.tier().stats().tails_swapped_out);
  // Each computed its 20 prompt tokens and 23 of its 24 generated ones once: nothing recomputed.
  EXPECT_EQ(s.prefill_tokens + s.decode_tokens, 2 * (20u + 23));
  EXPECT_EQ(d.tier().num_sequences_held(), 0);
}

}  // namespace
}  // namespace drift
