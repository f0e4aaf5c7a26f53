#include "util/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace drift {
namespace {

struct CpuidRegs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegs cpuid(uint32_t leaf, uint32_t subleaf) {
  CpuidRegs r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

bool bit(uint32_t reg, int index) { return (reg >> index) & 1u; }

// XCR0: which register states the OS saves on context switch. AVX needs XMM|YMM (bits 1-2);
// AVX-512 additionally needs opmask|ZMM_Hi256|Hi16_ZMM (bits 5-7).
uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

std::string read_brand() {
  if (cpuid(0x80000000u, 0).eax < 0x80000004u) return "unknown CPU";
  char brand[49] = {};
  for (uint32_t i = 0; i < 3; ++i) {
    CpuidRegs r = cpuid(0x80000002u + i, 0);
    std::memcpy(brand + 16 * i + 0, &r.eax, 4);
    std::memcpy(brand + 16 * i + 4, &r.ebx, 4);
    std::memcpy(brand + 16 * i + 8, &r.ecx, 4);
    std::memcpy(brand + 16 * i + 12, &r.edx, 4);
  }
  std::string s(brand);
  size_t first = s.find_first_not_of(' ');
  size_t last = s.find_last_not_of(' ');
  return first == std::string::npos ? "unknown CPU" : s.substr(first, last - first + 1);
}

}  // namespace

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
  f.brand = read_brand();
  uint32_t max_leaf = cpuid(0, 0).eax;
  if (max_leaf < 1) return f;
  CpuidRegs l1 = cpuid(1, 0);
  bool osxsave = bit(l1.ecx, 27);
  uint64_t xcr0 = osxsave ? read_xcr0() : 0;
  bool os_avx = (xcr0 & 0x6) == 0x6;
  bool os_avx512 = os_avx && (xcr0 & 0xE0) == 0xE0;

  f.avx = os_avx && bit(l1.ecx, 28);
  f.fma = f.avx && bit(l1.ecx, 12);
  f.f16c = f.avx && bit(l1.ecx, 29);
  if (max_leaf >= 7) {
    CpuidRegs l7 = cpuid(7, 0);
    f.avx2 = f.avx && bit(l7.ebx, 5);
    f.bmi2 = bit(l7.ebx, 8);
    f.avx512f = os_avx512 && bit(l7.ebx, 16);
    f.avx512dq = f.avx512f && bit(l7.ebx, 17);
    f.avx512bw = f.avx512f && bit(l7.ebx, 30);
    f.avx512vl = f.avx512f && bit(l7.ebx, 31);
    f.avx512vnni = f.avx512f && bit(l7.ecx, 11);
    if (l7.eax >= 1) f.avx512bf16 = f.avx512f && bit(cpuid(7, 1).eax, 5);
  }
  return f;
}

bool isa_supported(Isa isa, const CpuFeatures& f) {
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return f.avx2 && f.fma && f.f16c;
    case Isa::kAvx512:
      return isa_supported(Isa::kAvx2, f) && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq &&
             f.avx512vnni;
  }
  return false;
}

Isa best_isa(const CpuFeatures& f) {
  if (isa_supported(Isa::kAvx512, f)) return Isa::kAvx512;
  if (isa_supported(Isa::kAvx2, f)) return Isa::kAvx2;
  return Isa::kScalar;
}

std::vector<Isa> supported_isas(const CpuFeatures& f) {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512})
    if (isa_supported(isa, f)) out.push_back(isa);
  return out;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

std::optional<Isa> parse_isa(std::string_view name) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512})
    if (name == isa_name(isa)) return isa;
  return std::nullopt;
}

Expected<Isa> select_isa(const CpuFeatures& features) {
  const char* forced = std::getenv("DRIFT_ISA");
  if (forced == nullptr || *forced == '\0') return best_isa(features);
  std::optional<Isa> isa = parse_isa(forced);
  if (!isa) return make_error("DRIFT_ISA='{}' is not one of scalar, avx2, avx512", forced);
  if (!isa_supported(*isa, features))
    return make_error("DRIFT_ISA={} is not supported by this CPU ({})", forced,
                      describe_cpu(features));
  return *isa;
}

std::string describe_cpu(const CpuFeatures& f) {
  std::string s = f.brand + ":";
  auto add = [&](bool on, const char* name) {
    if (on) {
      s += ' ';
      s += name;
    }
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512dq, "avx512dq");
  add(f.avx512vnni, "avx512vnni");
  add(f.avx512bf16, "avx512bf16");
  return s;
}

}  // namespace drift
