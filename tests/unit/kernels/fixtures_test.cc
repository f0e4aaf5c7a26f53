// Dequantization and Q8_0 quantization against the gguf Python package (tests/data/kernels).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/dequantize.h"
#include "kernels/quantize.h"

namespace drift::kernels {
namespace {

using testing::bits;
using testing::isa_label;
using testing::isas_under_test;

std::vector<uint8_t> read_file(const std::string& name) {
  std::ifstream in(std::string(DRIFT_TEST_DATA_DIR) + "/kernels/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << name
                         << " (python3 scripts/fixtures/make_quant_fixtures.py)";
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class Reader {
 public:
  explicit Reader(std::vector<uint8_t> data) : data_(std::move(data)) {}
  template <typename T>
  T get() {
    T v{};
    if (pos_ + sizeof v > data_.size()) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, data_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  std::vector<uint8_t> bytes(uint64_t n) {
    if (pos_ + n > data_.size()) {
      ok_ = false;
      return {};
    }
    std::vector<uint8_t> out(data_.begin() + pos_, data_.begin() + pos_ + n);
    pos_ += n;
    return out;
  }
  std::string magic() {
    std::vector<uint8_t> m = bytes(4);
    return std::string(m.begin(), m.end());
  }
  std::string text() {
    std::vector<uint8_t> t = bytes(get<uint32_t>());
    return std::string(t.begin(), t.end());
  }
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == data_.size(); }

 private:
  std::vector<uint8_t> data_;
  size_t pos_ = 0;
  bool ok_ = true;
};

struct DequantCase {
  const char* file;
  Format format;
};

class DequantizeFixture : public ::testing::TestWithParam<DequantCase> {};

// Dequantization is one or two roundings per element in a fixed order (dequantize.h), the same
// order numpy evaluates in gguf.quants, so the results must be bit-identical: no tolerance.
TEST_P(DequantizeFixture, MatchesGgufPackageBitwise) {
  Reader r(read_file(GetParam().file));
  ASSERT_EQ(r.magic(), "DQFX");
  ASSERT_EQ(r.get<uint32_t>(), 1u);
  ASSERT_EQ(r.get<uint32_t>(), static_cast<uint32_t>(GetParam().format));
  const uint64_t n = r.get<uint64_t>();
  const uint64_t n_bytes = r.get<uint64_t>();
  const std::string provenance = r.text();
  EXPECT_NE(provenance.find("gguf 0.19.0"), std::string::npos) << provenance;
  const std::vector<uint8_t> blocks = r.bytes(n_bytes);
  std::vector<float> expected(n);
  for (float& f : expected) f = r.get<float>();
  ASSERT_TRUE(r.ok() && r.at_end());
  ASSERT_EQ(static_cast<int64_t>(n_bytes), row_bytes(GetParam().format, static_cast<int64_t>(n)));

  std::vector<float> got(n);
  dequantize_row(GetParam().format, blocks.data(), got.data(), static_cast<int64_t>(n));
  int mismatches = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (bits(expected[i]) != bits(got[i])) {  // NaN payloads included
      if (++mismatches <= 5)
        ADD_FAILURE() << "element " << i << ": expected " << expected[i] << " (0x" << std::hex
                      << bits(expected[i]) << "), got " << got[i] << " (0x" << bits(got[i]) << ")"
                      << std::dec;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(AllFormats, DequantizeFixture,
                         ::testing::Values(DequantCase{"dequant_f32.bin", Format::kF32},
                                           DequantCase{"dequant_f16.bin", Format::kF16},
                                           DequantCase{"dequant_bf16.bin", Format::kBF16},
                                           DequantCase{"dequant_q4_0.bin", Format::kQ4_0},
                                           DequantCase{"dequant_q4_1.bin", Format::kQ4_1},
                                           DequantCase{"dequant_q5_0.bin", Format::kQ5_0},
                                           DequantCase{"dequant_q5_1.bin", Format::kQ5_1},
                                           DequantCase{"dequant_q8_0.bin", Format::kQ8_0},
                                           DequantCase{"dequant_q4_K.bin", Format::kQ4_K},
                                           DequantCase{"dequant_q5_K.bin", Format::kQ5_K},
                                           DequantCase{"dequant_q6_K.bin", Format::kQ6_K},
                                           DequantCase{"dequant_q2_K.bin", Format::kQ2_K},
                                           DequantCase{"dequant_q3_K.bin", Format::kQ3_K},
                                           DequantCase{"dequant_iq4_nl.bin", Format::kIQ4_NL},
                                           DequantCase{"dequant_iq4_xs.bin", Format::kIQ4_XS},
                                           DequantCase{"dequant_mxfp4.bin", Format::kMXFP4}),
                         [](const ::testing::TestParamInfo<DequantCase>& info) {
                           return std::string(format_info(info.param.format).name);
                         });

// F16 -> F32 for all 65536 patterns on every ISA equals the package's numpy conversion.
TEST(DequantizeFixtureF16, RowConvertersMatchOnEveryIsa) {
  Reader r(read_file("dequant_f16.bin"));
  ASSERT_EQ(r.magic(), "DQFX");
  r.get<uint32_t>();
  r.get<uint32_t>();
  const uint64_t n = r.get<uint64_t>();
  const uint64_t n_bytes = r.get<uint64_t>();
  r.text();
  const std::vector<uint8_t> raw = r.bytes(n_bytes);
  std::vector<float> expected(n);
  for (float& f : expected) f = r.get<float>();
  ASSERT_TRUE(r.ok());
  std::vector<uint16_t> halves(n);
  std::memcpy(halves.data(), raw.data(), n_bytes);
  for (Isa isa : isas_under_test()) {
    std::vector<float> got(n);
    convert_fp16_to_f32(isa, halves.data(), got.data(), static_cast<int64_t>(n));
    EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), n * sizeof(float))) << isa_label(isa);
  }
}

// Activation quantization to Q8_0 equals gguf.quants.quantize (llama.cpp's reference), ties
// included, on every ISA.
TEST(QuantizeFixture, Q8_0MatchesGgufPackageOnEveryIsa) {
  Reader r(read_file("quant_q8_0.bin"));
  ASSERT_EQ(r.magic(), "Q8FX");
  ASSERT_EQ(r.get<uint32_t>(), 1u);
  const uint64_t n = r.get<uint64_t>();
  const uint64_t n_bytes = r.get<uint64_t>();
  r.text();
  std::vector<float> x(n);
  for (float& f : x) f = r.get<float>();
  const std::vector<uint8_t> expected = r.bytes(n_bytes);
  ASSERT_TRUE(r.ok() && r.at_end());
  ASSERT_EQ(n_bytes, n / kQK * sizeof(BlockQ8_0));

  std::vector<BlockQ8_0> ref(n / kQK);
  quantize_row_q8_0_ref(x.data(), ref.data(), static_cast<int64_t>(n));
  EXPECT_EQ(0, std::memcmp(ref.data(), expected.data(), n_bytes)) << "scalar reference";
  for (Isa isa : isas_under_test()) {
    std::vector<BlockQ8_0> got(n / kQK);
    quantize_row_q8_0(isa, x.data(), got.data(), static_cast<int64_t>(n));
    EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), n_bytes)) << isa_label(isa);
  }
}

}  // namespace
}  // namespace drift::kernels
