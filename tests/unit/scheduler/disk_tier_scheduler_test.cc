// The scheduler over a prefix cache with a disk tier, with the fake executor whose pages are its
// shadow slots: a page read back from disk must hold exactly what the reader's own history
// computes, or the fake's read check fails. Pages evicted from RAM are written to disk, a request
// that re-asks a prompt reads them back instead of computing them, also after a restart (a new
// KV pool, executor and store on the same directory), and corrupt, truncated or foreign files
// change no answer.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "tiered_driver.h"

namespace drift {
namespace {

namespace fs = std::filesystem;
using testing::prompt_of;
using testing::TempDir;
using testing::TieredDriver;

const std::vector<TokenId> kDocument = prompt_of(29, 100);  // 7 full pages + 1 token

// Two other prompts that need every page of the pool between them, so that the document's
// cached pages are evicted (to disk).
void crowd_out(TieredDriver& d, SeqId first_id) {
  d.ask(first_id, prompt_of(40, 500));
  d.ask(first_id + 1, prompt_of(40, 700));
}

TEST(DiskTierScheduler, EvictedPagesAreReadBackInsteadOfComputed) {
  TempDir dir;
  TieredDriver d(dir.path);
  EXPECT_EQ(d.ask(1, kDocument), d.reference(1, kDocument));
  EXPECT_EQ(d.tier().stats().pages_spilled, 0u) << "nothing left RAM yet";
  crowd_out(d, 10);
  d.store().drain();
  EXPECT_GE(d.tier().stats().pages_spilled, 7u);
  EXPECT_GE(d.store().stats().pages, 7u);

  const uint64_t hit_before = d.prefix().stats().hit_tokens;
  EXPECT_EQ(d.ask(2, kDocument), d.reference(2, kDocument));
  EXPECT_EQ(d.tier().stats().loads, 1u);
  EXPECT_EQ(d.tier().stats().pages_loaded, 7u) << "(29 - 1) / 4 pages: the last token computes";
  EXPECT_EQ(d.tier().stats().pages_load_failed, 0u);
  EXPECT_EQ(d.prefix().stats().hit_tokens - hit_before, 28u);
  EXPECT_GE(d.scheduler().stats().tier_waits, 1u);
  EXPECT_EQ(d.tier().num_loads(), 0);
  EXPECT_TRUE(d.kv().check_invariants().ok());
}

// A step that reclaims more cached pages than the store has staging slots. The pool frees a
// finished sequence's pages last page first, so such a step reaches the chain's first pages last
// — the ones every read of the chain starts from — and found every slot taken: they were dropped,
// and the pages written before them could never be reached. The pages the next step may reclaim
// are written ahead while steps run, so a step that reclaims them finds them on disk or staged.
TEST(DiskTierScheduler, PagesReclaimedByAStepLargerThanTheStagingAreReadBack) {
  TempDir dir;
  TieredDriver d(dir.path, KVDigest{11, 22}, 1 << 20, /*staging_pages=*/2);
  d.ask(1, kDocument);                // 7 registered pages, cached when it ends
  d.ask(10, prompt_of(20, 500), 12);  // decodes 12 steps while those pages wait in RAM
  d.ask(11, prompt_of(40, 700));      // reclaims them, up to 4 pages a step
  d.store().drain();
  EXPECT_EQ(d.store().stats().writes_dropped, 0u);
  const uint64_t hit_before = d.prefix().stats().hit_tokens;
  EXPECT_EQ(d.ask(2, kDocument), d.reference(2, kDocument));
  EXPECT_EQ(d.tier().stats().pages_loaded, 7u) << "every page of the document's chain";
  EXPECT_EQ(d.prefix().stats().hit_tokens - hit_before, 28u);
}

TEST(DiskTierScheduler, APromptFindsItsPagesAfterARestart) {
  TempDir dir;
  {
    TieredDriver first(dir.path);
    first.ask(1, kDocument);
    crowd_out(first, 10);  // evicted: written as they leave RAM
  }
  {
    TieredDriver second(dir.path);  // a new pool, a new executor whose slots hold nothing
    EXPECT_GE(second.store().stats().pages_indexed_at_start, 7u);
    EXPECT_EQ(second.ask(2, kDocument), second.reference(2, kDocument));
    EXPECT_EQ(second.tier().stats().pages_loaded, 7u);
    // Still in RAM at the end of this life: written back, as the engine does at shutdown.
    const std::vector<TokenId> other = prompt_of(21, 900);
    second.ask(3, other);
    EXPECT_GT(second.tier().write_back_cached(), 0);
  }
  TieredDriver third(dir.path);
  const std::vector<TokenId> other = prompt_of(21, 900);
  EXPECT_EQ(third.ask(4, other), third.reference(4, other));
  EXPECT_EQ(third.tier().stats().pages_loaded, 5u);
}

// Damages every page file of the document's folder with `damage`, between two lives.
template <typename Damage>
void damage_files(const fs::path& dir, Damage damage) {
  for (const auto& folder : fs::directory_iterator(dir)) {
    if (!folder.is_directory()) continue;
    for (const auto& file : fs::directory_iterator(folder.path()))
      if (file.path().extension() == ".kvp") damage(file.path());
  }
}

TEST(DiskTierScheduler, CorruptPagesAreRecomputedNeverUsed) {
  TempDir dir;
  {
    TieredDriver first(dir.path);
    first.ask(1, kDocument);
    crowd_out(first, 10);
  }
  damage_files(dir.path, testing::flip_last_byte);
  TieredDriver second(dir.path);
  EXPECT_EQ(second.ask(2, kDocument), second.reference(2, kDocument));
  EXPECT_EQ(second.tier().stats().pages_loaded, 0u);
  EXPECT_GE(second.tier().stats().pages_load_failed, 1u);
  EXPECT_GE(second.store().stats().read_failures, 1u);
}

TEST(DiskTierScheduler, TruncatedPagesAreDroppedAtStartAndRecomputed) {
  TempDir dir;
  {
    TieredDriver first(dir.path);
    first.ask(1, kDocument);
    crowd_out(first, 10);
  }
  damage_files(dir.path,
               [](const fs::path& file) { fs::resize_file(file, fs::file_size(file) / 2); });
  TieredDriver second(dir.path);
  EXPECT_EQ(second.store().stats().pages_indexed_at_start, 0u);
  EXPECT_GE(second.store().stats().files_dropped_at_start, 7u);
  EXPECT_EQ(second.ask(2, kDocument), second.reference(2, kDocument));
  EXPECT_EQ(second.tier().stats().loads, 0u);
}

TEST(DiskTierScheduler, AnotherModelsDirectoryChangesNoAnswer) {
  TempDir dir;
  {
    TieredDriver first(dir.path, KVDigest{1, 1});
    first.ask(1, kDocument);
    crowd_out(first, 10);
  }
  TieredDriver other_model(dir.path, KVDigest{2, 2});
  EXPECT_EQ(other_model.ask(2, kDocument), other_model.reference(2, kDocument));
  EXPECT_EQ(other_model.tier().stats().loads, 0u);
}

TEST(DiskTierScheduler, TheBudgetHoldsWhilePagesSpill) {
  TempDir dir;
  uint64_t file_bytes = 0;
  {
    TieredDriver probe(dir.path);
    file_bytes = probe.store().file_bytes();
  }
  TempDir small;
  TieredDriver d(small.path, KVDigest{11, 22}, 4 * file_bytes);
  d.ask(1, kDocument);
  crowd_out(d, 10);
  d.ask(12, prompt_of(40, 300));
  d.store().drain();
  const KVDiskStats s = d.store().stats();
  EXPECT_LE(s.bytes, 4 * file_bytes);
  EXPECT_EQ(s.pages, 4u);
  EXPECT_EQ(s.pages_evicted, s.pages_written - 4);
  // What is left is a run of the most recently evicted pages; the document reads what remains of
  // its chain (none, or a prefix of it) and still answers the same.
  EXPECT_EQ(d.ask(2, kDocument), d.reference(2, kDocument));
}

}  // namespace
}  // namespace drift

namespace drift {
namespace {

// A RAM hit whose cached pages are more than the pool can spare, because other sequences'
// reservations hold the rest: dropping rows until the load fits must stop at the hit, never
// shape a load of fewer rows than the hit (which once threw out of the engine's worker and
// failed every request). The document is then computed past its hit, the same tokens.
TEST(DiskTierScheduler, AHitLargerThanTheRoomLeftLoadsNothingAndIsComputed) {
  TempDir dir;
  TieredDriver d(dir.path);
  EXPECT_EQ(d.ask(1, kDocument), d.reference(1, kDocument));
  // Take pages until the document's last two pages have left RAM (LRU: its chain's leaves).
  std::vector<PageId> chain;
  auto ram_pages = [&] {
    return d.prefix().match(d.prefix().root(0), kDocument, 7, chain).num_pages;
  };
  ASSERT_TRUE(d.kv().open(99, 4096).ok());
  while (ram_pages() > 5) ASSERT_TRUE(d.kv().append(99, testing::kPageSize).has_value());
  d.store().drain();
  ASSERT_EQ(ram_pages(), 5);
  // Reserve all but one available page for another sequence.
  ASSERT_TRUE(d.kv().open(98, 4096).ok());
  const int32_t spare = d.kv().num_available_pages() - 1;
  ASSERT_GT(spare, 0);
  ASSERT_TRUE(d.kv().reserve(98, KVUsageEstimate{spare * testing::kPageSize, spare, 0}).ok());
  ASSERT_EQ(d.kv().num_available_pages(), 1);

  SequenceRequest r;
  r.id = 2;
  r.prompt = kDocument;
  r.max_new_tokens = 3;
  d.scheduler().add(testing::admitted(std::move(r)));
  for (int i = 0; i < 5; ++i) d.step(false);  // the fetch finds no room; the test's pages held
  d.kv().release(98);
  d.kv().release(99);
  for (int i = 0; i < 1000 && d.scheduler().has_unfinished(); ++i) d.step();
  ASSERT_FALSE(d.scheduler().has_unfinished());
  EXPECT_EQ(d.generated(2), d.reference(2, kDocument));
  EXPECT_TRUE(d.kv().check_invariants().ok());
}

// Two requests for the same document on disk at once: the second waits for the first one's
// load instead of reading the same pages into pages of its own (twice the room, twice the I/O).
TEST(DiskTierScheduler, TwoRequestsForOneDocumentOnDiskReadItOnce) {
  TempDir dir;
  TieredDriver d(dir.path);
  EXPECT_EQ(d.ask(1, kDocument), d.reference(1, kDocument));
  crowd_out(d, 10);
  d.store().drain();
  SequenceRequest a, b;
  a.id = 2;
  b.id = 3;
  a.prompt = b.prompt = kDocument;
  a.max_new_tokens = b.max_new_tokens = 3;
  std::vector<SequenceRequest> both;
  both.push_back(std::move(a));
  both.push_back(std::move(b));
  auto out = d.run_together(std::move(both));
  EXPECT_EQ(out[2], d.reference(2, kDocument));
  EXPECT_EQ(out[3], d.reference(3, kDocument));
  EXPECT_EQ(d.tier().stats().loads, 1u);
  EXPECT_EQ(d.tier().stats().pages_loaded, 7u);
  EXPECT_EQ(d.prefix().stats().hit_tokens % 28, 0u) << "each request's 28 tokens found cached";
}

// The RAG mix's case: the document is on disk, a running request holds most of the pool, and a
// request for the document arrives. Reading what fits and computing the rest is slower than
// waiting for the running request to finish and reading it all, when computing costs more
// than the wait; the scheduler holds the request (for at most what computing would take).
struct RoomForADocument {
  TempDir dir;
  TieredDriver d{dir.path};
  static constexpr SeqId kRunning = 3, kReader = 2;
  const std::vector<TokenId> running_prompt = prompt_of(30, 300);

  // The document cached, spilled to disk, and a request of 30 + 12 tokens (11 pages reserved
  // of 16) running, so that the document's 7 pages do not fit until it ends.
  explicit RoomForADocument(std::optional<double> seconds_per_prefill_token) {
    EXPECT_EQ(d.ask(1, kDocument), d.reference(1, kDocument));
    crowd_out(d, 10);
    d.store().drain();
    EXPECT_GE(d.store().stats().pages, 7u);
    if (seconds_per_prefill_token)
      d.scheduler().set_recompute_costs(RecomputeCosts{*seconds_per_prefill_token, 0});
    d.set_step_seconds(0.01);
    add(kRunning, running_prompt, 12);
    d.step();
    EXPECT_LT(d.kv().num_available_pages(), 7);
    add(kReader, kDocument, 3);
  }
  void add(SeqId id, const std::vector<TokenId>& prompt, int32_t max_new) {
    SequenceRequest r;
    r.id = id;
    r.prompt = prompt;
    r.max_new_tokens = max_new;
    d.scheduler().add(testing::admitted(std::move(r)));
  }
  void run_to_end() {
    for (int i = 0; i < 1000 && d.scheduler().has_unfinished(); ++i) d.step();
    ASSERT_FALSE(d.scheduler().has_unfinished());
    EXPECT_EQ(d.generated(kRunning), d.reference(kRunning, running_prompt, 12));
    EXPECT_EQ(d.generated(kReader), d.reference(kReader, kDocument));
  }
};

TEST(DiskTierScheduler, ARequestHoldsForRoomToReadItsWholePrefixWhenComputingCostsMore) {
  RoomForADocument room(/*seconds_per_prefill_token=*/1.0);  // 28 s to compute, 0.01 s a step
  room.run_to_end();
  const SchedulerStats& s = room.d.scheduler().stats();
  EXPECT_EQ(s.room_holds, 1u);
  EXPECT_EQ(s.room_holds_expired, 0u);
  EXPECT_EQ(room.d.tier().stats().loads, 1u);
  EXPECT_EQ(room.d.tier().stats().pages_loaded, 7u) << "the whole document, none computed";
}

TEST(DiskTierScheduler, AHoldLastsNoLongerThanComputingThePrefixWouldTake) {
  // 28 tokens at 1 ms: the hold gives up after three 10 ms steps, while the other request still
  // has 9 tokens to decode, and reads what fits.
  RoomForADocument room(/*seconds_per_prefill_token=*/0.001);
  room.run_to_end();
  const SchedulerStats& s = room.d.scheduler().stats();
  EXPECT_EQ(s.room_holds, 1u);
  EXPECT_EQ(s.room_holds_expired, 1u);
  EXPECT_LT(room.d.tier().stats().pages_loaded, 7u) << "what fitted; the rest computed";
}

TEST(DiskTierScheduler, NoHoldBeforeTheCostOfComputingIsMeasured) {
  RoomForADocument room(std::nullopt);
  room.run_to_end();
  EXPECT_EQ(room.d.scheduler().stats().room_holds, 0u);
  EXPECT_LT(room.d.tier().stats().pages_loaded, 7u);
}

}  // namespace
}  // namespace drift
