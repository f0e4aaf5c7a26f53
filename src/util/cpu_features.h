// Run-time CPU feature detection (cpuid + xgetbv) and the choice of kernel ISA.
//
// One binary runs everywhere: SIMD kernels are compiled per file with their own -m flags and only
// called when the CPU (and the OS, via XCR0) supports them. DRIFT_ISA=scalar|avx2|avx512 forces a
// path so that tests and benchmarks can exercise each one.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace drift {

struct CpuFeatures {
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool bmi2 = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  std::string brand;  // e.g. "AMD EPYC 9R14"
};

// Kernel paths, ordered from least to most capable.
enum class Isa {
  kScalar,  // portable C++, the reference every SIMD kernel is tested against
  kAvx2,    // AVX2 + FMA + F16C
  kAvx512,  // AVX-512 F/BW/VL/DQ + VNNI
};

CpuFeatures detect_cpu_features();
bool isa_supported(Isa isa, const CpuFeatures& features);
Isa best_isa(const CpuFeatures& features);
// Every ISA this CPU can run, scalar first.
std::vector<Isa> supported_isas(const CpuFeatures& features);

std::string_view isa_name(Isa isa);
std::optional<Isa> parse_isa(std::string_view name);

// The ISA to use: DRIFT_ISA if set (an error if unknown or not supported by this CPU),
// otherwise the best one the CPU supports.
Expected<Isa> select_isa(const CpuFeatures& features);

// A one-line summary of the detected features, for logs and benchmark records.
std::string describe_cpu(const CpuFeatures& features);

}  // namespace drift
