// The pooling arithmetic of embedding requests (executor/pooling.h): which rows each mode asks
// for, and that folding a prompt chunk by chunk gives the vector of one pass over it, bit for bit,
// wherever the chunks begin.
#include "executor/pooling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace drift {
namespace {

constexpr int64_t kDim = 3;

// Token t's hidden row: distinct, non-trivial values (so that summation order would show).
std::vector<float> rows(int64_t first, int64_t count) {
  std::vector<float> out;
  for (int64_t t = first; t < first + count; ++t)
    for (int64_t j = 0; j < kDim; ++j) out.push_back(std::sin(0.37f * float(t * kDim + j)) * 3.1f);
  return out;
}

// Pools a prompt of `n` tokens split into chunks at `cuts`, as the executor does step by step.
std::vector<float> pool_in_chunks(PoolingMode mode, int64_t n, std::vector<int64_t> cuts) {
  std::vector<float> embedding(kDim, 123.0f);  // garbage: position 0 must start afresh
  cuts.push_back(n);
  int64_t start = 0;
  for (int64_t end : cuts) {
    const bool completes = end == n;
    const PooledRows want = pooled_rows(mode, start, end - start, completes);
    pool_chunk(mode, start, rows(start + want.begin, want.count), embedding);
    if (completes) finish_embedding(mode, n, embedding);
    start = end;
  }
  return embedding;
}

double norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s);
}

TEST(Pooling, EachModeAsksForItsRows) {
  EXPECT_EQ(pooled_rows(PoolingMode::kMean, 8, 5, false).count, 5);
  EXPECT_EQ(pooled_rows(PoolingMode::kCls, 0, 5, false).begin, 0);
  EXPECT_EQ(pooled_rows(PoolingMode::kCls, 0, 5, false).count, 1);
  EXPECT_EQ(pooled_rows(PoolingMode::kCls, 5, 5, true).count, 0);
  EXPECT_EQ(pooled_rows(PoolingMode::kLast, 0, 5, false).count, 0);
  EXPECT_EQ(pooled_rows(PoolingMode::kLast, 5, 5, true).begin, 4);
  EXPECT_EQ(pooled_rows(PoolingMode::kLast, 5, 5, true).count, 1);
  EXPECT_EQ(pooled_rows(PoolingMode::kNone, 0, 5, true).count, 0);
}

TEST(Pooling, MeanIsTheNormalisedAverageOfEveryRow) {
  const std::vector<float> all = rows(0, 10);
  std::vector<double> mean(kDim, 0.0);
  for (int64_t t = 0; t < 10; ++t)
    for (int64_t j = 0; j < kDim; ++j) mean[j] += all[t * kDim + j] / 10.0;
  const std::vector<float> pooled = pool_in_chunks(PoolingMode::kMean, 10, {});
  double mean_norm = 0;
  for (double x : mean) mean_norm += x * x;
  mean_norm = std::sqrt(mean_norm);
  for (int64_t j = 0; j < kDim; ++j) EXPECT_NEAR(pooled[j], mean[j] / mean_norm, 1e-6) << j;
  EXPECT_NEAR(norm(pooled), 1.0, 1e-6);
}

TEST(Pooling, ChunkBoundariesDoNotChangeABit) {
  for (PoolingMode mode : {PoolingMode::kMean, PoolingMode::kLast, PoolingMode::kCls}) {
    const std::vector<float> whole = pool_in_chunks(mode, 23, {});
    EXPECT_EQ(pool_in_chunks(mode, 23, {1}), whole) << pooling_mode_name(mode);
    EXPECT_EQ(pool_in_chunks(mode, 23, {7, 16, 22}), whole) << pooling_mode_name(mode);
  }
}

TEST(Pooling, LastAndClsKeepTheirTokensRowNormalised) {
  std::vector<float> last = rows(22, 1), cls = rows(0, 1);
  const double last_norm = norm(last), cls_norm = norm(cls);
  for (float& x : last) x = float(x / last_norm);
  for (float& x : cls) x = float(x / cls_norm);
  const std::vector<float> pooled_last = pool_in_chunks(PoolingMode::kLast, 23, {9});
  const std::vector<float> pooled_cls = pool_in_chunks(PoolingMode::kCls, 23, {9});
  for (int64_t j = 0; j < kDim; ++j) {
    EXPECT_NEAR(pooled_last[j], last[j], 1e-6);
    EXPECT_NEAR(pooled_cls[j], cls[j], 1e-6);
  }
}

TEST(Pooling, AZeroVectorStaysZero) {
  std::vector<float> zero(kDim, 0.0f);
  finish_embedding(PoolingMode::kLast, 1, zero);
  EXPECT_EQ(zero, std::vector<float>(kDim, 0.0f));
}

}  // namespace
}  // namespace drift
