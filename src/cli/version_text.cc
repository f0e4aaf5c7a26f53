#include <fmt/format.h>

#include "build_info.h"
#include "util/cpu_features.h"

namespace drift::cli {

std::string version_text() {
  const CpuFeatures cpu = detect_cpu_features();
  const Expected<Isa> isa = select_isa(cpu);
  std::string supported;
  for (Isa each : supported_isas(cpu)) {
    if (!supported.empty()) supported += ", ";
    supported += isa_name(each);
  }
  return fmt::format(
      "drift {}\ncommit {}, {} build, {}\nCPU: {}\nkernels: {} (this CPU supports {}; DRIFT_ISA "
      "forces one)",
      DRIFT_VERSION, kBuildCommit, kBuildType, kBuildCompiler, describe_cpu(cpu),
      isa.ok() ? std::string(isa_name(*isa)) : "none: " + isa.error().message, supported);
}

}  // namespace drift::cli
