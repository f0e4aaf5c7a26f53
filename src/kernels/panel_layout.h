// Internal: the byte layout of a 16-row panel, shared by the repacker and the panel kernels.
//
// A panel is k / block_size tiles, one per block (or K-quant super-block), stored back to back so
// that a kernel streams them in order. In every quant array below, a run of 64 bytes is one
// 512-bit register: lane r (bytes 4r .. 4r + 3) holds four consecutive elements of row r, i.e.
// "group" l of a block covers elements [4l, 4l + 4). Scales stay fp16 (as in the file) so that a
// panel reads no more bytes than the rows it replaces (decode is bound by those bytes).
//
//   Q4_0 tile (288 B):  qs[4][64]  byte (g, 4r + i) = q[r][4g + i] | q[r][16 + 4g + i] << 4
//                       (low nibbles: group g; high nibbles: group g + 4), d[16] fp16
//   Q4_1 tile (320 B):  qs[4][64] as Q4_0, d[16], m[16] fp16
//   Q5_0 tile (352 B):  qs[4][64] as Q4_0 (the low 4 bits), qh[8] uint64: bit 4r + i of qh[l] is
//                       the fifth bit of q[r][4l + i]; d[16] fp16
//   Q5_1 tile (384 B):  as Q5_0, then m[16] fp16
//   IQ4_NL tile (288 B): as Q4_0, the nibbles being codes of the codebook (lowbit_quants.h)
//   MXFP4 tile (272 B): qs[4][64] as Q4_0, the nibbles being codes of kMXFP4Values, e[16] the
//                       E8M0 scale bytes as in the file (so a tile is the bytes of its 16 blocks)
//   Q8_0 tile (544 B):  qs[8][64]  byte (l, 4r + i) = w[r][4l + i] + 128 (unsigned), d[16]
//   Q4_K tile (2368 B): d[16], dmin[16] fp16, sc[8][16] (sub-block j, row r), mn[4][16][2]
//                       (pair i of row r: mn[2i], mn[2i + 1]), qs[8][4][64] with sub-block j's
//                       byte (g, 4r + i) = q[r][32j + 4g + i] | q[r][32j + 16 + 4g + i] << 4
//   Q6_K tile (3360 B): d[16] fp16, sc[16][16] int8, then per 16-element sub-block j:
//                       lo[2][64] byte (h, 4r + i) = low4(q[r][16j + 4h + i])
//                                                  | low4(q[r][16j + 8 + 4h + i]) << 4
//                       hi[64]   byte (4r + i) = sum over g < 4 of high2(q[r][16j + 4g + i]) << 2g
//   IQ4_XS tile (2208 B): d[16] fp16, sc[8][16] int8 (sub-block j's scale minus 32, row r),
//                       qs[8][4][64] codes of sub-block j as Q4_K's quants
//   Q2_K tile (1344 B): d[16], dmin[16] fp16, scales[16][16] (sub-block j, row r: the file's byte,
//                       scale | min << 4), qs[16][64] with sub-block j's
//                       byte (4r + i) = sum over g < 4 of q[r][16j + 4g + i] << 2g
//   Q3_K tile (1824 B): d[16] fp16, sc[16][16] int8 (scale minus 32), then per pair p of
//                       sub-blocks: lo[2][64] as Q2_K's qs (the low 2 bits) for sub-blocks 2p,
//                       2p + 1, and hi[64] with bit 4h + g of byte (4r + i) the high bit of
//                       q[r][16(2p + h) + 4g + i]; the code c = low | high << 2 is q + 4
// Padding rows (beyond the matrix) are all-zero bytes: zero quants and zero scales.
#pragma once

#include <cstdint>

#include "kernels/format.h"

namespace drift::kernels {
namespace {

// Weight bytes of the panels a kernel runs over every token before moving on (panel_loop): small
// enough to stay in L2 (1 MB or more per core on the CPUs drift targets) beside the activations
// and outputs. Measured on Gemma 3 pp512 (5 alternated runs): 128 KB 1442 t/s median, 256 KB 1359,
// 512 KB 1344, one panel at a time 1345.
inline constexpr int64_t kPanelChunkBytes = 128 * 1024;

struct TileQ4_0 {
  uint8_t qs[4][64];
  uint16_t d[16];
};
struct TileQ4_1 {
  uint8_t qs[4][64];
  uint16_t d[16];
  uint16_t m[16];
};
struct TileQ5_0 {
  uint8_t qs[4][64];
  uint64_t qh[8];
  uint16_t d[16];
};
struct TileQ5_1 {
  uint8_t qs[4][64];
  uint64_t qh[8];
  uint16_t d[16];
  uint16_t m[16];
};
struct TileIQ4_NL {
  uint8_t qs[4][64];
  uint16_t d[16];
};
struct TileMXFP4 {
  uint8_t qs[4][64];
  uint8_t e[16];
};
struct TileQ8_0 {
  uint8_t qs[8][64];
  uint16_t d[16];
};
struct TileQ4_K {
  uint16_t d[16];
  uint16_t dmin[16];
  uint8_t sc[8][16];
  uint8_t mn[4][16][2];
  uint8_t qs[8][4][64];
};
struct TileQ6_K {
  uint16_t d[16];
  int8_t sc[16][16];
  struct Sub {
    uint8_t lo[2][64];
    uint8_t hi[64];
  } sub[16];
};
static_assert(sizeof(TileQ4_0) == 288 && sizeof(TileQ4_1) == 320 && sizeof(TileQ8_0) == 544);
static_assert(sizeof(TileQ5_0) == 352 && sizeof(TileQ5_1) == 384);
struct TileIQ4_XS {
  uint16_t d[16];
  int8_t sc[8][16];
  uint8_t qs[8][4][64];
};
struct TileQ2_K {
  uint16_t d[16];
  uint16_t dmin[16];
  uint8_t scales[16][16];
  uint8_t qs[16][64];
};
struct TileQ3_K {
  uint16_t d[16];
  int8_t sc[16][16];
  struct Pair {
    uint8_t lo[2][64];
    uint8_t hi[64];
  } pair[8];
};
static_assert(sizeof(TileIQ4_NL) == 288 && sizeof(TileIQ4_XS) == 2208);
static_assert(sizeof(TileMXFP4) == 272);
static_assert(sizeof(TileQ2_K) == 1344 && sizeof(TileQ3_K) == 1824);
static_assert(sizeof(TileQ4_K) == 2368 && sizeof(TileQ6_K) == 3360);

}  // namespace
}  // namespace drift::kernels
