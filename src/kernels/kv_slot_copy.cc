#include "kernels/kv_slot_copy.h"

#include <cstring>

namespace drift::kernels {
namespace {

// Copies element `from` of data part `src` to element `to` of `dst`, `bits` wide.
inline void copy_element(const uint8_t* src, int64_t from, uint8_t* dst, int64_t to, int64_t bits) {
  if (bits == 4) {
    const uint8_t code = (src[from / 2] >> ((from & 1) * 4)) & 0x0f;
    uint8_t& byte = dst[to / 2];
    byte = (to & 1) ? static_cast<uint8_t>((byte & 0x0f) | (code << 4))
                    : static_cast<uint8_t>((byte & 0xf0) | code);
    return;
  }
  const int64_t bytes = bits / 8;
  std::memcpy(dst + to * bytes, src + from * bytes, static_cast<size_t>(bytes));
}

const uint16_t* scales_of(KvFormat f, const uint8_t* block, int64_t dim, int64_t page_size) {
  return reinterpret_cast<const uint16_t*>(block + kv_data_bytes(f, dim, page_size));
}
uint16_t* scales_of(KvFormat f, uint8_t* block, int64_t dim, int64_t page_size) {
  return reinterpret_cast<uint16_t*>(block + kv_data_bytes(f, dim, page_size));
}

}  // namespace

// Element e of a key slot is data element e * page_size + slot; scale g is g * page_size + slot
// (int8), or the slot's master and its sub-scales [g][slot] (int4).
void kv_copy_key_slot(KvFormat f, const uint8_t* src, int64_t src_slot, uint8_t* dst,
                      int64_t dst_slot, int64_t dim, int64_t page_size) {
  const int64_t bits = kv_format_bits(f);
  for (int64_t e = 0; e < dim; ++e)
    copy_element(src, e * page_size + src_slot, dst, e * page_size + dst_slot, bits);
  const int64_t group = kv_key_group(f, dim);
  if (group == 0) return;
  if (f == KvFormat::kInt4) {
    const int64_t masters = kv_int4_masters_offset(dim, page_size);
    std::memmove(dst + masters + 2 * dst_slot, src + masters + 2 * src_slot, 2);
    const int64_t subs = kv_int4_subs_offset(dim, page_size);
    for (int64_t g = 0; g < dim / group; ++g)
      dst[subs + g * page_size + dst_slot] = src[subs + g * page_size + src_slot];
    return;
  }
  const uint16_t* from = scales_of(f, src, dim, page_size);
  uint16_t* to = scales_of(f, dst, dim, page_size);
  for (int64_t g = 0; g < dim / group; ++g)
    to[g * page_size + dst_slot] = from[g * page_size + src_slot];
}

// A value slot is the row of data elements [slot * dim, (slot + 1) * dim) and the scales
// [slot * groups, (slot + 1) * groups).
void kv_copy_value_slot(KvFormat f, const uint8_t* src, int64_t src_slot, uint8_t* dst,
                        int64_t dst_slot, int64_t dim, int64_t page_size) {
  const int64_t bits = kv_format_bits(f);
  if (bits == 4 && dim % 2 != 0) {
    for (int64_t e = 0; e < dim; ++e)
      copy_element(src, src_slot * dim + e, dst, dst_slot * dim + e, bits);
  } else {
    const int64_t row_bytes = dim * bits / 8;
    std::memmove(dst + dst_slot * row_bytes, src + src_slot * row_bytes,
                 static_cast<size_t>(row_bytes));
  }
  const int64_t group = kv_value_group(f, dim);
  if (group == 0) return;
  const int64_t groups = dim / group;
  std::memmove(scales_of(f, dst, dim, page_size) + dst_slot * groups,
               scales_of(f, src, dim, page_size) + src_slot * groups,
               static_cast<size_t>(groups) * sizeof(uint16_t));
}

}  // namespace drift::kernels
