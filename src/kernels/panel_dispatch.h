// Internal: the per-ISA panel kernel tables (panel_avx2.cc, panel_avx512.cc), reached only
// through panel_matmul() after the caller checked that the CPU has the ISA.
#pragma once

#include "kernels/format.h"
#include "kernels/panel.h"

namespace drift::kernels {
namespace avx2 {
PanelMatmulFn panel_matmul(Format format);
}  // namespace avx2
namespace avx512 {
PanelMatmulFn panel_matmul(Format format);
}  // namespace avx512
}  // namespace drift::kernels
