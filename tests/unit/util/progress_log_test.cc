#include "util/progress_log.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "util/signal_stack.h"

namespace drift {
namespace {

std::vector<ProgressRecord> snapshot_all(const ProgressLog& log) {
  std::vector<ProgressRecord> records(ProgressLog::kCapacity);
  records.resize(log.snapshot(records));
  return records;
}

// Everything `dump` writes, through a pipe.
std::string dump_to_string(const ProgressLog& log) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  std::string out;
  std::thread reader([&] {
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, size_t(n));
  });
  log.dump(fds[1]);
  close(fds[1]);
  reader.join();
  close(fds[0]);
  return out;
}

TEST(ProgressLog, KeepsEventsInOrderWithTheirFields) {
  ProgressLog log;
  log.record(ProgressEvent::kEnqueue, 7, 512, 64);
  log.record(ProgressEvent::kPrefillChunk, 7, 0, 256);
  log.record(ProgressEvent::kFinish, 7, 1, 64);
  auto records = snapshot_all(log);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].event, ProgressEvent::kEnqueue);
  EXPECT_EQ(records[0].seq_id, 7u);
  EXPECT_EQ(records[0].a, 512);
  EXPECT_EQ(records[0].b, 64);
  EXPECT_EQ(records[1].event, ProgressEvent::kPrefillChunk);
  EXPECT_EQ(records[2].index, 2u);
  EXPECT_LE(records[0].time_ns, records[2].time_ns);
  EXPECT_STREQ(progress_event_name(ProgressEvent::kPrefillChunk), "prefill_chunk");
}

TEST(ProgressLog, KeepsOnlyTheLast512) {
  ProgressLog log;
  for (int i = 0; i < 1300; ++i) log.record(ProgressEvent::kDecode, uint64_t(i), i, -i);
  EXPECT_EQ(log.total_recorded(), 1300u);
  auto records = snapshot_all(log);
  ASSERT_EQ(records.size(), 512u);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].index, 1300 - 512 + i);
    EXPECT_EQ(records[i].seq_id, records[i].index);
    EXPECT_EQ(records[i].a, int64_t(records[i].index));
    EXPECT_EQ(records[i].b, -int64_t(records[i].index));
  }
  std::array<ProgressRecord, 4> newest;
  ASSERT_EQ(log.snapshot(newest), 4u);
  EXPECT_EQ(newest[3].index, 1299u);
}

TEST(ProgressLog, DumpWritesOneLinePerEventWithNamedFields) {
  ProgressLog log;
  log.record(ProgressEvent::kEnqueue, 3, 100, 20);
  log.record(ProgressEvent::kCancel, 3, 2);
  log.record(ProgressEvent::kStep, 41, 8, -1);
  std::string out = dump_to_string(log);
  EXPECT_NE(out.find("last 3 of 3 engine events"), std::string::npos) << out;
  EXPECT_NE(out.find("enqueue seq=3 prompt_tokens=100 max_new_tokens=20\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("cancel seq=3 phase=2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("step step=41 tokens=8 items=-1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  #0 -0."), std::string::npos) << out;
}

TEST(ProgressLog, ConcurrentWritersNeverProduceTornRecords) {
  ProgressLog log;
  constexpr int kPerThread = 20000;
  auto writer = [&](uint64_t tag) {
    for (int i = 0; i < kPerThread; ++i)
      log.record(ProgressEvent::kDecode, tag, int64_t(tag) * 1000003 + i, int64_t(tag) ^ i);
  };
  std::thread a(writer, 1), b(writer, 2);
  int consistent_reads = 0;
  auto check_snapshot = [&] {
    for (const ProgressRecord& rec : snapshot_all(log)) {
      int64_t i = rec.a - int64_t(rec.seq_id) * 1000003;
      ASSERT_TRUE(rec.seq_id == 1 || rec.seq_id == 2);
      ASSERT_EQ(rec.b, int64_t(rec.seq_id) ^ i) << "torn record";
      ++consistent_reads;
    }
  };
  // Read while the writers run (however late a loaded machine starts them), then once more.
  while (log.total_recorded() < 2u * kPerThread) check_snapshot();
  a.join();
  b.join();
  check_snapshot();
  EXPECT_EQ(log.total_recorded(), 2u * kPerThread);
  EXPECT_EQ(snapshot_all(log).size(), 512u);
  EXPECT_GT(consistent_reads, 0);
}

// The crash paths run in a child process that dies; its stderr must show the recent events.
void record_engine_events(ProgressLog& log) {
  log.record(ProgressEvent::kEnqueue, 7, 600, 32);
  log.record(ProgressEvent::kAdmit, 7, 0, 40);
  log.record(ProgressEvent::kPrefillChunk, 7, 0, 512);
  log.record(ProgressEvent::kPrefillChunk, 7, 512, 88);
  log.record(ProgressEvent::kDecode, 7, 600, 38);
}

class ProgressLogCrashTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(ProgressLogCrashTest, AbortDumpsRecentEvents) {
  EXPECT_DEATH(
      {
        ProgressLog log;
        record_engine_events(log);
        install_progress_crash_handler(log);
        std::abort();
      },
      "fatal signal SIGABRT(.|\n)*prefill_chunk seq=7 start=512 tokens=88(.|\n)*decode seq=7 "
      "position=600 pages=38");
}

TEST_F(ProgressLogCrashTest, SegfaultDumpsRecentEvents) {
  EXPECT_DEATH(
      {
        ProgressLog log;
        record_engine_events(log);
        install_progress_crash_handler(log);
        std::raise(SIGSEGV);
      },
      "fatal signal SIGSEGV(.|\n)*admit seq=7 steps_waited=0 pages_reserved=40");
}

TEST_F(ProgressLogCrashTest, TerminateDumpsRecentEventsOnce) {
  EXPECT_DEATH(
      {
        ProgressLog log;
        record_engine_events(log);
        install_progress_crash_handler(log);
        std::terminate();
      },
      "std::terminate called\ndrift: last 5 of 5 engine events(.|\n)*decode seq=7");
}

// Recurses until the thread's stack runs out: each frame keeps a volatile buffer in use, so the
// compiler can neither drop the frames nor turn the recursion into a loop.
[[gnu::noinline]] int overflow_stack(int depth) {
  volatile char frame[1024];
  frame[0] = char(depth);
  if (depth < 0) return 0;  // never: keeps the recursion from being provably infinite
  return overflow_stack(depth + 1) + frame[0];
}

// A stack overflow leaves the crash handler no stack of the thread's own to run on: the dump is
// written only because every thread drift starts has an alternate signal stack.
TEST_F(ProgressLogCrashTest, StackOverflowInAThreadDumpsRecentEvents) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer's runtime does not survive a stack overflow";
#endif
  EXPECT_DEATH(
      {
        ProgressLog log;
        record_engine_events(log);
        install_progress_crash_handler(log);
        std::thread([] {
          ensure_alternate_signal_stack();
          overflow_stack(0);
        }).join();
      },
      "fatal signal SIGSEGV(.|\n)*decode seq=7 position=600 pages=38");
}

// The same through fork + waitpid, checking that the child really dies of SIGABRT and that the
// dump is printed exactly once.
TEST(ProgressLogCrash, ForkedChildThatAbortsPrintsItsEventsAndDiesOfSigabrt) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    ProgressLog log;
    record_engine_events(log);
    install_progress_crash_handler(log);
    std::abort();
  }
  close(fds[1]);
  std::string err;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) err.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status << "\n" << err;
  EXPECT_EQ(WTERMSIG(status), SIGABRT);
  EXPECT_NE(err.find("enqueue seq=7 prompt_tokens=600 max_new_tokens=32"), std::string::npos)
      << err;
  EXPECT_NE(err.find("prefill_chunk seq=7 start=0 tokens=512"), std::string::npos) << err;
  EXPECT_EQ(err.find("engine events"), err.rfind("engine events")) << "dumped twice:\n" << err;
}

TEST(ProgressLogCrash, UninstallRestoresThePreviousHandlers) {
  ProgressLog log;
  install_progress_crash_handler(log);
  uninstall_progress_crash_handler();
  struct sigaction current;
  ASSERT_EQ(sigaction(SIGABRT, nullptr, &current), 0);
  EXPECT_EQ(current.sa_handler, SIG_DFL);
}

}  // namespace
}  // namespace drift
