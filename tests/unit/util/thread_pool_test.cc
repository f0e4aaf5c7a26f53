#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

namespace drift {
namespace {

TEST(ThreadPool, EveryThreadRunsEachJobOnceWithItsIndex) {
  for (int n : {1, 2, 3, 5}) {
    ThreadPool pool(n);
    EXPECT_EQ(pool.size(), n);
    for (int round = 0; round < 200; ++round) {
      std::vector<std::atomic<int>> hits(n);
      pool.run([&](int index, int count) {
        ASSERT_EQ(count, n);
        hits[index].fetch_add(1);
      });
      for (int i = 0; i < n; ++i)
        ASSERT_EQ(hits[i].load(), 1) << "thread " << i << " round " << round;
    }
  }
}

TEST(ThreadPool, RunReturnsOnlyAfterAllWorkIsDone) {
  ThreadPool pool(3);
  std::vector<int64_t> out(30000, 0);
  for (int round = 0; round < 50; ++round) {
    pool.run([&](int index, int count) {
      Range r = split_range(static_cast<int64_t>(out.size()), index, count);
      for (int64_t i = r.begin; i < r.end; ++i) out[i] += i;
    });
  }
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], 50 * static_cast<int64_t>(i));
}

TEST(ThreadPool, WorkersWakeAfterSleeping) {
  ThreadPool pool(2);
  std::atomic<int> total{0};
  for (int round = 0; round < 3; ++round) {
    // Long enough for the spinning phase to end and the worker to block on the futex.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    pool.run([&](int, int) { total.fetch_add(1); });
  }
  EXPECT_EQ(total.load(), 6);
}

TEST(SplitRange, CoversEveryIndexExactlyOnce) {
  for (int64_t n : {0, 1, 7, 64, 1000}) {
    for (int parts : {1, 2, 3, 8}) {
      int64_t expected_begin = 0;
      for (int i = 0; i < parts; ++i) {
        Range r = split_range(n, i, parts);
        EXPECT_EQ(r.begin, expected_begin);
        EXPECT_LE(r.end - r.begin, n / parts + 1);
        expected_begin = r.end;
      }
      EXPECT_EQ(expected_begin, n);
    }
  }
}

}  // namespace
}  // namespace drift
