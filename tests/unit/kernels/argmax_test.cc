// argmax: every ISA gives the reference's index (the first maximum, NaN never chosen) on rows of
// every length, with ties, infinities and NaN.
#include "kernels/argmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernel_test_util.h"

namespace drift::kernels {
namespace {

using testing::isa_label;
using testing::isas_under_test;

void expect_all_isas(const std::vector<float>& x, int32_t want, const char* what) {
  ASSERT_EQ(argmax(Isa::kScalar, x.data(), static_cast<int64_t>(x.size())), want) << what;
  for (Isa isa : isas_under_test())
    EXPECT_EQ(argmax(isa, x.data(), static_cast<int64_t>(x.size())), want)
        << isa_label(isa) << ": " << what << ", n=" << x.size();
}

TEST(Argmax, RandomRowsOfEveryLengthAgreeWithTheReference) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int64_t n : {1, 2, 7, 8, 9, 31, 32, 33, 63, 100, 1000, 49152, 49153}) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    int32_t want = 0;
    for (int64_t i = 1; i < n; ++i)
      if (x[i] > x[want]) want = static_cast<int32_t>(i);
    expect_all_isas(x, want, "random");
  }
}

TEST(Argmax, TiesGoToTheFirstIndexWhateverLaneHoldsThem) {
  for (int64_t n : {40, 49152}) {
    for (int64_t first : {int64_t{0}, int64_t{5}, int64_t{17}, n / 2, n - 9, n - 1}) {
      std::vector<float> x(n, -1.0f);
      // The same maximum at `first` and at later indices in other lanes and in the tail.
      for (int64_t i = first; i < n; i += 13) x[i] = 4.0f;
      expect_all_isas(x, static_cast<int32_t>(first), "ties");
    }
  }
}

TEST(Argmax, NanIsNeverChosenAndInfinitiesAreOrdered) {
  std::vector<float> x(50, 1.0f);
  x[0] = NAN;
  x[3] = 2.0f;
  x[20] = NAN;
  expect_all_isas(x, 3, "NaN first");
  x[45] = INFINITY;
  expect_all_isas(x, 45, "+inf in the tail");
  std::vector<float> masked(70, -INFINITY);
  expect_all_isas(masked, 0, "all -inf");
  masked[0] = NAN;
  expect_all_isas(masked, 1, "NaN then -inf");
  masked[66] = -1e30f;
  expect_all_isas(masked, 66, "one finite value among -inf");
  std::vector<float> nan(33, NAN);
  expect_all_isas(nan, 0, "all NaN");
}

}  // namespace
}  // namespace drift::kernels
