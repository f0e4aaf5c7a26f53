// Panels: support, sizes, the repacker, the per-step activation sums, the scalar kernel (which
// reads panels, and so checks the repacker) and the dispatch to the SIMD kernels.
#include "kernels/panel.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/dequantize.h"
#include "kernels/fp16.h"
#include "kernels/lowbit_quants.h"
#include "kernels/panel_dispatch.h"
#include "kernels/panel_layout.h"

namespace drift::kernels {
namespace {

int64_t tile_bytes(Format format) {
  switch (format) {
    case Format::kQ4_0:
      return sizeof(TileQ4_0);
    case Format::kQ4_1:
      return sizeof(TileQ4_1);
    case Format::kQ5_0:
      return sizeof(TileQ5_0);
    case Format::kQ5_1:
      return sizeof(TileQ5_1);
    case Format::kQ8_0:
      return sizeof(TileQ8_0);
    case Format::kIQ4_NL:
      return sizeof(TileIQ4_NL);
    case Format::kMXFP4:
      return sizeof(TileMXFP4);
    case Format::kIQ4_XS:
      return sizeof(TileIQ4_XS);
    case Format::kQ2_K:
      return sizeof(TileQ2_K);
    case Format::kQ3_K:
      return sizeof(TileQ3_K);
    case Format::kQ4_K:
      return sizeof(TileQ4_K);
    case Format::kQ6_K:
      return sizeof(TileQ6_K);
    default:
      return 0;
  }
}

int64_t block_elements(Format format) { return format_info(format).block_size; }

// Elements per block of a weight or activation block type.
template <class Block>
constexpr int64_t kElements =
    std::is_same_v<Block, BlockQ4_K> || std::is_same_v<Block, BlockQ6_K> ||
            std::is_same_v<Block, BlockQ8_K> || std::is_same_v<Block, BlockIQ4_XS> ||
            std::is_same_v<Block, BlockQ2_K> || std::is_same_v<Block, BlockQ3_K>
        ? kQKK
        : kQK;

// ---- Repacking: one file block of one row into its lane of a tile.

void put_nibble_groups(uint8_t (*qs)[64], int64_t r, const int* q) {
  // q: the block's 32 values (0..15); byte (g, 4r + i) = q[4g + i] | q[16 + 4g + i] << 4.
  for (int g = 0; g < 4; ++g)
    for (int i = 0; i < 4; ++i)
      qs[g][4 * r + i] = static_cast<uint8_t>(q[4 * g + i] | q[16 + 4 * g + i] << 4);
}

void repack_block(const BlockQ4_0& b, int64_t r, TileQ4_0& t) {
  int q[32];
  for (int j = 0; j < 16; ++j) {
    q[j] = b.qs[j] & 15;
    q[j + 16] = b.qs[j] >> 4;
  }
  put_nibble_groups(t.qs, r, q);
  t.d[r] = b.d;
}

void repack_block(const BlockQ4_1& b, int64_t r, TileQ4_1& t) {
  int q[32];
  for (int j = 0; j < 16; ++j) {
    q[j] = b.qs[j] & 15;
    q[j + 16] = b.qs[j] >> 4;
  }
  put_nibble_groups(t.qs, r, q);
  t.d[r] = b.d;
  t.m[r] = b.m;
}

// The 32 five-bit values of a Q5_0/Q5_1 block.
void q5_values(const uint8_t* qh_bytes, const uint8_t* qs, int* q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof qh);
  for (int j = 0; j < 16; ++j) {
    q[j] = (qs[j] & 15) | static_cast<int>(((qh >> j) & 1u) << 4);
    q[j + 16] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
  }
}

template <class Tile>
void put_q5(const int* q, int64_t r, Tile& t) {
  int low[32];
  for (int e = 0; e < 32; ++e) {
    low[e] = q[e] & 15;
    if (q[e] >> 4) t.qh[e / 4] |= uint64_t{1} << (4 * r + e % 4);
  }
  put_nibble_groups(t.qs, r, low);
}

void repack_block(const BlockQ5_0& b, int64_t r, TileQ5_0& t) {
  int q[32];
  q5_values(b.qh, b.qs, q);
  put_q5(q, r, t);
  t.d[r] = b.d;
}

void repack_block(const BlockQ5_1& b, int64_t r, TileQ5_1& t) {
  int q[32];
  q5_values(b.qh, b.qs, q);
  put_q5(q, r, t);
  t.d[r] = b.d;
  t.m[r] = b.m;
}

void repack_block(const BlockIQ4_NL& b, int64_t r, TileIQ4_NL& t) {
  int q[32];
  for (int j = 0; j < 16; ++j) {
    q[j] = b.qs[j] & 15;
    q[j + 16] = b.qs[j] >> 4;
  }
  put_nibble_groups(t.qs, r, q);
  t.d[r] = b.d;
}

void repack_block(const BlockMXFP4& b, int64_t r, TileMXFP4& t) {
  int q[32];
  for (int j = 0; j < 16; ++j) {
    q[j] = b.qs[j] & 15;
    q[j + 16] = b.qs[j] >> 4;
  }
  put_nibble_groups(t.qs, r, q);
  t.e[r] = b.e;
}

void repack_block(const BlockQ8_0& b, int64_t r, TileQ8_0& t) {
  for (int l = 0; l < 8; ++l)
    for (int i = 0; i < 4; ++i) t.qs[l][4 * r + i] = static_cast<uint8_t>(b.qs[4 * l + i] + 128);
  t.d[r] = b.d;
}

void repack_block(const BlockQ4_K& b, int64_t r, TileQ4_K& t) {
  t.d[r] = b.d;
  t.dmin[r] = b.dmin;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    unpack_scale_min_k4(b.scales, j, &sc, &mn);
    t.sc[j][r] = sc;
    t.mn[j / 2][r][j % 2] = mn;
  }
  // File order: chunk c of 64 elements = 32 bytes, low nibbles elements [0, 32), high [32, 64).
  int q[kQKK];
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = b.qs[32 * c + l] & 15;
      q[64 * c + 32 + l] = b.qs[32 * c + l] >> 4;
    }
  for (int j = 0; j < 8; ++j) put_nibble_groups(t.qs[j], r, q + 32 * j);
}

void repack_block(const BlockQ6_K& b, int64_t r, TileQ6_K& t) {
  t.d[r] = b.d;
  for (int j = 0; j < 16; ++j) t.sc[j][r] = b.scales[j];
  int q[kQKK];  // unsigned 6-bit values in element order
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    int* out = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      out[l] = (ql[l] & 15) | ((qh[l] >> 0) & 3) << 4;
      out[l + 32] = (ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4;
      out[l + 64] = (ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4;
      out[l + 96] = (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4;
    }
  }
  for (int j = 0; j < 16; ++j) {
    const int* s = q + 16 * j;
    TileQ6_K::Sub& sub = t.sub[j];
    for (int i = 0; i < 4; ++i) {
      for (int h = 0; h < 2; ++h)
        sub.lo[h][4 * r + i] =
            static_cast<uint8_t>((s[4 * h + i] & 15) | (s[8 + 4 * h + i] & 15) << 4);
      int hi = 0;
      for (int g = 0; g < 4; ++g) hi |= (s[4 * g + i] >> 4) << (2 * g);
      sub.hi[4 * r + i] = static_cast<uint8_t>(hi);
    }
  }
}

void repack_block(const BlockIQ4_XS& b, int64_t r, TileIQ4_XS& t) {
  t.d[r] = b.d;
  for (int j = 0; j < 8; ++j) {
    t.sc[j][r] = static_cast<int8_t>(unpack_scale_iq4_xs(b, j));
    int q[32];
    for (int i = 0; i < 16; ++i) {
      q[i] = b.qs[16 * j + i] & 15;
      q[i + 16] = b.qs[16 * j + i] >> 4;
    }
    put_nibble_groups(t.qs[j], r, q);
  }
}

// Four 2-bit values per byte: byte (4r + i) of a 16-element sub-block = sum of q[4g + i] << 2g.
void put_two_bit_groups(uint8_t* qs, int64_t r, const int* q) {
  for (int i = 0; i < 4; ++i) {
    int byte = 0;
    for (int g = 0; g < 4; ++g) byte |= (q[4 * g + i] & 3) << (2 * g);
    qs[4 * r + i] = static_cast<uint8_t>(byte);
  }
}

void repack_block(const BlockQ2_K& b, int64_t r, TileQ2_K& t) {
  t.d[r] = b.d;
  t.dmin[r] = b.dmin;
  int q[kQKK], scale[16], min[16];
  unpack_q2_k(b, q, scale, min);
  for (int j = 0; j < 16; ++j) {
    t.scales[j][r] = b.scales[j];
    put_two_bit_groups(t.qs[j], r, q + 16 * j);
  }
}

void repack_block(const BlockQ3_K& b, int64_t r, TileQ3_K& t) {
  t.d[r] = b.d;
  int q[kQKK], scale[16];
  unpack_q3_k(b, q, scale);
  for (int j = 0; j < 16; ++j) {
    t.sc[j][r] = static_cast<int8_t>(scale[j]);
    TileQ3_K::Pair& pair = t.pair[j / 2];
    int code[16];
    for (int e = 0; e < 16; ++e) code[e] = q[16 * j + e] + 4;
    put_two_bit_groups(pair.lo[j % 2], r, code);
    for (int i = 0; i < 4; ++i)
      for (int g = 0; g < 4; ++g)
        if (code[4 * g + i] & 4) pair.hi[4 * r + i] |= static_cast<uint8_t>(1 << (4 * (j % 2) + g));
  }
}

template <class Block, class Tile>
void repack(const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t k, uint8_t* out,
            int64_t panel_begin, int64_t panel_end) {
  const int64_t nb = k / kElements<Block>;
  auto* tiles = reinterpret_cast<Tile*>(out);
  std::memset(tiles + panel_begin * nb, 0,
              static_cast<size_t>((panel_end - panel_begin) * nb) * sizeof(Tile));
  for (int64_t row = panel_begin * kPanelRows; row < std::min(rows, panel_end * kPanelRows);
       ++row) {
    const auto* blocks = reinterpret_cast<const Block*>(w + row * row_bytes);
    Tile* panel = tiles + (row / kPanelRows) * nb;
    for (int64_t b = 0; b < nb; ++b) repack_block(blocks[b], row % kPanelRows, panel[b]);
  }
}

// ---- The scalar kernel: the canonical order of panel.h, reading the panel layout.

int nibble_group_value(const uint8_t (*qs)[64], int64_t r, int e) {
  // Element e of a 32-element block (group l = e / 4 from byte run l % 4, high nibble if l >= 4).
  const int l = e / 4, i = e % 4;
  const uint8_t byte = qs[l % 4][4 * r + i];
  return l < 4 ? byte & 15 : byte >> 4;
}

int32_t sum_q8(const int8_t* a, int n) {
  int32_t s = 0;
  for (int e = 0; e < n; ++e) s += a[e];
  return s;
}

int q5_value(const uint8_t (*qs)[64], const uint64_t* qh, int64_t r, int e) {
  return nibble_group_value(qs, r, e) | static_cast<int>((qh[e / 4] >> (4 * r + e % 4)) & 1) << 4;
}

// The weight of element e of row r in a 32-element tile (the signed w for Q4_0, Q5_0 and Q8_0,
// the unsigned q for the formats with a min).
int weight(const TileQ4_0& t, int64_t r, int e) { return nibble_group_value(t.qs, r, e) - 8; }
int weight(const TileQ4_1& t, int64_t r, int e) { return nibble_group_value(t.qs, r, e); }
int weight(const TileQ5_0& t, int64_t r, int e) { return q5_value(t.qs, t.qh, r, e) - 16; }
int weight(const TileQ5_1& t, int64_t r, int e) { return q5_value(t.qs, t.qh, r, e); }
int weight(const TileQ8_0& t, int64_t r, int e) { return t.qs[e / 4][4 * r + e % 4] - 128; }
int weight(const TileIQ4_NL& t, int64_t r, int e) {
  return kIQ4Values[nibble_group_value(t.qs, r, e)];
}
int weight(const TileMXFP4& t, int64_t r, int e) {
  return kMXFP4Values[nibble_group_value(t.qs, r, e)];
}

// fp32(d_w) of row r: the fp16 scale, or MXFP4's 2^(e - 128).
template <class Tile>
float weight_scale(const Tile& t, int64_t r) {
  return fp16_to_f32(t.d[r]);
}
float weight_scale(const TileMXFP4& t, int64_t r) { return mxfp4_scale(t.e[r]); }

// 32-element formats: P per block, one fma chain, and for Q4_1/Q5_1 the min chain (panel.h).
template <class Tile, class ABlock>
float row_blocks32(const Tile* t, int64_t r, const ABlock* a, int64_t nb) {
  constexpr bool kHasMin = std::is_same_v<ABlock, BlockQ8_1>;
  float acc = 0.0f, summ = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t p = 0;
    for (int e = 0; e < 32; ++e) p += weight(t[b], r, e) * a[b].qs[e];
    acc = std::fma(weight_scale(t[b], r) * fp16_to_f32(a[b].d), static_cast<float>(p), acc);
    if constexpr (kHasMin) summ = std::fma(fp16_to_f32(t[b].m[r]), fp16_to_f32(a[b].s), summ);
  }
  if constexpr (kHasMin) return acc + summ;
  return acc;
}

float row_q4_k(const TileQ4_K* t, int64_t r, const BlockQ8_K* a, int64_t nb) {
  float acc = 0.0f, summ = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t l_sum = 0, m_sum = 0;
    for (int j = 0; j < 8; ++j) {
      int32_t p = 0;
      for (int e = 0; e < 32; ++e) p += nibble_group_value(t[b].qs[j], r, e) * a[b].qs[32 * j + e];
      l_sum += t[b].sc[j][r] * p;
      m_sum += t[b].mn[j / 2][r][j % 2] * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
    }
    acc = std::fma(fp16_to_f32(t[b].d[r]) * a[b].d, static_cast<float>(l_sum), acc);
    summ = std::fma(fp16_to_f32(t[b].dmin[r]) * a[b].d, static_cast<float>(m_sum), summ);
  }
  return acc - summ;
}

int q6_value(const TileQ6_K::Sub& s, int64_t r, int e) {
  // Element e of a 16-element sub-block: group g = e / 4.
  const int g = e / 4, i = e % 4;
  const uint8_t lo = s.lo[g % 2][4 * r + i];
  const int low = g < 2 ? lo & 15 : lo >> 4;
  return low | ((s.hi[4 * r + i] >> (2 * g)) & 3) << 4;
}

float row_q6_k(const TileQ6_K* t, int64_t r, const BlockQ8_K* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t l_sum = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t p = 0;
      for (int e = 0; e < 16; ++e) p += q6_value(t[b].sub[j], r, e) * a[b].qs[16 * j + e];
      l_sum += t[b].sc[j][r] * (p - 32 * a[b].bsums[j]);
    }
    acc = std::fma(fp16_to_f32(t[b].d[r]) * a[b].d, static_cast<float>(l_sum), acc);
  }
  return acc;
}

float row_iq4_xs(const TileIQ4_XS* t, int64_t r, const BlockQ8_K* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t l_sum = 0;
    for (int j = 0; j < 8; ++j) {
      int32_t p = 0;
      for (int e = 0; e < 32; ++e)
        p += kIQ4Values[nibble_group_value(t[b].qs[j], r, e)] * a[b].qs[32 * j + e];
      l_sum += t[b].sc[j][r] * p;
    }
    acc = std::fma(fp16_to_f32(t[b].d[r]) * a[b].d, static_cast<float>(l_sum), acc);
  }
  return acc;
}

int two_bit_value(const uint8_t* qs, int64_t r, int e) {
  return (qs[4 * r + e % 4] >> (2 * (e / 4))) & 3;
}

float row_q2_k(const TileQ2_K* t, int64_t r, const BlockQ8_K* a, int64_t nb) {
  float acc = 0.0f, summ = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t l_sum = 0, m_sum = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t p = 0;
      for (int e = 0; e < 16; ++e) p += two_bit_value(t[b].qs[j], r, e) * a[b].qs[16 * j + e];
      l_sum += (t[b].scales[j][r] & 15) * p;
      m_sum += (t[b].scales[j][r] >> 4) * a[b].bsums[j];
    }
    acc = std::fma(fp16_to_f32(t[b].d[r]) * a[b].d, static_cast<float>(l_sum), acc);
    summ = std::fma(fp16_to_f32(t[b].dmin[r]) * a[b].d, static_cast<float>(m_sum), summ);
  }
  return acc - summ;
}

float row_q3_k(const TileQ3_K* t, int64_t r, const BlockQ8_K* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t l_sum = 0;
    for (int j = 0; j < 16; ++j) {
      const TileQ3_K::Pair& pair = t[b].pair[j / 2];
      int32_t p = 0;
      for (int e = 0; e < 16; ++e) {
        const int high = (pair.hi[4 * r + e % 4] >> (4 * (j % 2) + e / 4)) & 1;
        const int code = two_bit_value(pair.lo[j % 2], r, e) | high << 2;
        p += (code - 4) * a[b].qs[16 * j + e];
      }
      l_sum += t[b].sc[j][r] * p;
    }
    acc = std::fma(fp16_to_f32(t[b].d[r]) * a[b].d, static_cast<float>(l_sum), acc);
  }
  return acc;
}

template <class Tile, class ABlock, float (*kRow)(const Tile*, int64_t, const ABlock*, int64_t)>
void scalar_panels(const PanelArgs& args, int64_t panel_begin, int64_t panel_end) {
  const int64_t nb = args.k / kElements<ABlock>;
  const auto* tiles = reinterpret_cast<const Tile*>(args.panels);
  for (int64_t p = panel_begin; p < panel_end; ++p)
    for (int64_t r = 0; r < kPanelRows && p * kPanelRows + r < args.rows; ++r)
      for (int64_t t = 0; t < args.n_tokens; ++t) {
        const auto* a = reinterpret_cast<const ABlock*>(args.x + t * args.x_row_bytes);
        args.y[t * args.y_row_stride + p * kPanelRows + r] = kRow(tiles + p * nb, r, a, nb);
      }
}

}  // namespace

bool panel_supported(Format format) { return tile_bytes(format) != 0; }

int64_t panel_bytes(Format format, int64_t k) {
  return k / block_elements(format) * tile_bytes(format);
}

int64_t panel_matrix_bytes(Format format, int64_t rows, int64_t k) {
  return (rows + kPanelRows - 1) / kPanelRows * panel_bytes(format, k);
}

void repack_panels(Format format, const void* w, int64_t row_bytes, int64_t rows, int64_t k,
                   void* out) {
  repack_panels(format, w, row_bytes, rows, k, out, 0, (rows + kPanelRows - 1) / kPanelRows);
}

void repack_panels(Format format, const void* w, int64_t row_bytes, int64_t rows, int64_t k,
                   void* out, int64_t panel_begin, int64_t panel_end) {
  const auto* src = static_cast<const uint8_t*>(w);
  auto* dst = static_cast<uint8_t*>(out);
  switch (format) {
    case Format::kQ4_0:
      return repack<BlockQ4_0, TileQ4_0>(src, row_bytes, rows, k, dst, panel_begin, panel_end);
    case Format::kQ4_1:
      return repack<BlockQ4_1, TileQ4_1>(src, row_bytes, rows, k, dst, panel_begin, panel_end);
    case Format::kQ5_0:
      return repack<BlockQ5_0, TileQ5_0>(src, row_bytes, rows, k, dst, panel_begin, panel_end);
    case Format::kQ5_1:
      return repack<BlockQ5_1, TileQ5_1>(src, row_bytes, rows, k, dst, panel_begin, panel_end);
    case Format::kQ8_0:
      return repack<BlockQ8_0, TileQ8_0>(src, row_bytes, rows, k, dst, panel_begin, panel_end);
    case Format::kIQ4_NL:
      return repack<BlockIQ4_NL, TileIQ4_NL>(src, row_bytes, rows, k, dst, panel_begin, panel_end);
    case Format::kMXFP4:
      return repack<BlockMXFP4, TileMXFP4>(src, row_bytes, rows, k, dst, panel_begin, panel_end);
    case Format::kIQ4_XS:
      return repack<BlockIQ4_XS, TileIQ4_XS>(src, row_bytes, rows, k, dst, panel_begin, panel_end);
    case Format::kQ2_K:
      return repack<BlockQ2_K, TileQ2_K>(src, row_bytes, rows, k, dst, panel_begin, panel_end);
    case Format::kQ3_K:
      return repack<BlockQ3_K, TileQ3_K>(src, row_bytes, rows, k, dst, panel_begin, panel_end);
    case Format::kQ4_K:
      return repack<BlockQ4_K, TileQ4_K>(src, row_bytes, rows, k, dst, panel_begin, panel_end);
    case Format::kQ6_K:
      return repack<BlockQ6_K, TileQ6_K>(src, row_bytes, rows, k, dst, panel_begin, panel_end);
    default:
      assert(false && "format has no panel layout");
  }
}

int64_t panel_sums_row_bytes(Format format, int64_t k) {
  return block_elements(format) == kQKK ? k / kQKK * int64_t{sizeof(PanelSumsK)}
                                        : k / kQK * int64_t{sizeof(PanelSums32)};
}

void prepare_panel_sums(Format format, const void* xq, int64_t xq_row_bytes, int64_t n_tokens,
                        int64_t k, void* sums, int64_t sums_row_bytes) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const uint8_t* row = static_cast<const uint8_t*>(xq) + t * xq_row_bytes;
    uint8_t* out = static_cast<uint8_t*>(sums) + t * sums_row_bytes;
    if (block_elements(format) == kQKK) {
      const auto* a = reinterpret_cast<const BlockQ8_K*>(row);
      auto* s = reinterpret_cast<PanelSumsK*>(out);
      for (int64_t b = 0; b < k / kQKK; ++b) {
        s[b].d = a[b].d;
        for (int j = 0; j < 8; ++j)
          s[b].bsums32[j] = static_cast<int16_t>(a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
        for (int j = 0; j < 16; ++j) s[b].offsets6[j] = 32 * a[b].bsums[j];
      }
    } else if (format == Format::kQ4_1 || format == Format::kQ5_1) {
      const auto* a = reinterpret_cast<const BlockQ8_1*>(row);
      auto* s = reinterpret_cast<PanelSums32*>(out);
      for (int64_t b = 0; b < k / kQK; ++b)
        s[b] = PanelSums32{fp16_to_f32(a[b].d), fp16_to_f32(a[b].s), 0, 0};
    } else {
      const auto* a = reinterpret_cast<const BlockQ8_0*>(row);
      auto* s = reinterpret_cast<PanelSums32*>(out);
      for (int64_t b = 0; b < k / kQK; ++b)
        s[b] = PanelSums32{fp16_to_f32(a[b].d), 0.0f, sum_q8(a[b].qs, kQK), 0};
    }
  }
}

PanelMatmulFn panel_matmul(Isa isa, Format format) {
  if (isa == Isa::kAvx512) return avx512::panel_matmul(format);
  if (isa == Isa::kAvx2) return avx2::panel_matmul(format);
  switch (format) {
    case Format::kQ4_0:
      return scalar_panels<TileQ4_0, BlockQ8_0, row_blocks32<TileQ4_0, BlockQ8_0>>;
    case Format::kQ4_1:
      return scalar_panels<TileQ4_1, BlockQ8_1, row_blocks32<TileQ4_1, BlockQ8_1>>;
    case Format::kQ5_0:
      return scalar_panels<TileQ5_0, BlockQ8_0, row_blocks32<TileQ5_0, BlockQ8_0>>;
    case Format::kQ5_1:
      return scalar_panels<TileQ5_1, BlockQ8_1, row_blocks32<TileQ5_1, BlockQ8_1>>;
    case Format::kQ8_0:
      return scalar_panels<TileQ8_0, BlockQ8_0, row_blocks32<TileQ8_0, BlockQ8_0>>;
    case Format::kIQ4_NL:
      return scalar_panels<TileIQ4_NL, BlockQ8_0, row_blocks32<TileIQ4_NL, BlockQ8_0>>;
    case Format::kMXFP4:
      return scalar_panels<TileMXFP4, BlockQ8_0, row_blocks32<TileMXFP4, BlockQ8_0>>;
    case Format::kIQ4_XS:
      return scalar_panels<TileIQ4_XS, BlockQ8_K, row_iq4_xs>;
    case Format::kQ2_K:
      return scalar_panels<TileQ2_K, BlockQ8_K, row_q2_k>;
    case Format::kQ3_K:
      return scalar_panels<TileQ3_K, BlockQ8_K, row_q3_k>;
    case Format::kQ4_K:
      return scalar_panels<TileQ4_K, BlockQ8_K, row_q4_k>;
    case Format::kQ6_K:
      return scalar_panels<TileQ6_K, BlockQ8_K, row_q6_k>;
    default:
      assert(false && "format has no panel layout");
      return nullptr;
  }
}

}  // namespace drift::kernels
