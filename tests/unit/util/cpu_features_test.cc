#include "util/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace drift {
namespace {

TEST(CpuFeatures, IsaNamesRoundTrip) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  EXPECT_EQ(parse_isa("sse9"), std::nullopt);
}

TEST(CpuFeatures, SupportedIsasAreOrderedAndIncludeScalar) {
  CpuFeatures features = detect_cpu_features();
  std::vector<Isa> isas = supported_isas(features);
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::kScalar);
  EXPECT_EQ(isas.back(), best_isa(features));
}

TEST(CpuFeatures, Avx512RequiresAvx2) {
  CpuFeatures f;
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512vnni = true;
  EXPECT_FALSE(isa_supported(Isa::kAvx512, f));
  f.avx2 = f.fma = f.f16c = true;
  EXPECT_TRUE(isa_supported(Isa::kAvx512, f));
  EXPECT_EQ(best_isa(f), Isa::kAvx512);
}

TEST(CpuFeatures, EnvironmentForcesAndValidatesIsa) {
  CpuFeatures none;  // a CPU with no SIMD at all
  setenv("DRIFT_ISA", "scalar", 1);
  EXPECT_EQ(*select_isa(none), Isa::kScalar);
  setenv("DRIFT_ISA", "avx2", 1);
  auto unsupported = select_isa(none);
  ASSERT_FALSE(unsupported.ok());
  EXPECT_NE(unsupported.error().message.find("not supported by this CPU"), std::string::npos);
  setenv("DRIFT_ISA", "neon", 1);
  auto unknown = select_isa(none);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("not one of scalar, avx2, avx512"), std::string::npos);
  unsetenv("DRIFT_ISA");
  EXPECT_EQ(*select_isa(none), Isa::kScalar);
}

}  // namespace
}  // namespace drift
