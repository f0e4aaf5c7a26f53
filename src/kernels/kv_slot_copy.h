// Moves one token's stored key or value from one slot of a block to a slot of another (or the
// same) block, bit for bit: its codes and its scales (kernels/kv_format.h), so that a moved entry
// reads back exactly as it was written. KV-Compress compacts the entries a head keeps so.
#pragma once

#include <cstdint>

#include "kernels/kv_format.h"

namespace drift::kernels {

// Key blocks (transposed): slot `src_slot` of `src` -> slot `dst_slot` of `dst`. The two may be
// the same block when the slots differ.
void kv_copy_key_slot(KvFormat format, const uint8_t* src, int64_t src_slot, uint8_t* dst,
                      int64_t dst_slot, int64_t dim, int64_t page_size);
// Value blocks (rows), likewise.
void kv_copy_value_slot(KvFormat format, const uint8_t* src, int64_t src_slot, uint8_t* dst,
                        int64_t dst_slot, int64_t dim, int64_t page_size);

}  // namespace drift::kernels
