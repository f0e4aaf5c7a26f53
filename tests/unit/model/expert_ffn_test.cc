// gpt-oss's mixture-of-experts layer (model/expert_ffn.h) against the same layer in double: the
// router's bias before top-k-then-softmax, each expert's gate, up and down biases, the clamped
// SwiGLU (llama.cpp's build_moe_ffn with LLM_FFN_SWIGLU_OAI_MOE), on every ISA and thread count.
#include "model/expert_ffn.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/matmul.h"

namespace drift {
namespace {

constexpr int64_t kEmbd = 64, kFf = 32, kExperts = 4, kUsed = 2, kTokens = 5;

std::vector<float> normals(int64_t n, std::mt19937& rng, float sd) {
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// An f32 matrix [rows][cols] viewing `data`, multiplied with `isa`'s kernel.
WeightMatrix f32_matrix(const float* data, int64_t rows, int64_t cols, Isa isa) {
  WeightMatrix m;
  m.format = kernels::Format::kF32;
  m.data = reinterpret_cast<const uint8_t*>(data);
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = cols * static_cast<int64_t>(sizeof(float));
  m.matmul = kernels::matmul_kernels(isa).matmul(kernels::Format::kF32);
  return m;
}

// The layer's tensors, gpt-oss's shapes scaled down; gate and up outputs reach well past the clamp
// (limit 7) and the biases are as large as the outputs, so dropping any of them fails the test.
struct GptOssExperts {
  std::vector<float> router, router_b;      // [kExperts][kEmbd], [kExperts]
  std::vector<float> gate, up, down;        // [kExperts][kFf][kEmbd] x2, [kExperts][kEmbd][kFf]
  std::vector<float> gate_b, up_b, down_b;  // [kExperts][kFf] x2, [kExperts][kEmbd]

  explicit GptOssExperts(std::mt19937& rng)
      : router(normals(kExperts * kEmbd, rng, 0.3f)),
        router_b(normals(kExperts, rng, 1.0f)),
        gate(normals(kExperts * kFf * kEmbd, rng, 0.6f)),
        up(normals(kExperts * kFf * kEmbd, rng, 0.6f)),
        down(normals(kExperts * kEmbd * kFf, rng, 0.2f)),
        gate_b(normals(kExperts * kFf, rng, 2.0f)),
        up_b(normals(kExperts * kFf, rng, 2.0f)),
        down_b(normals(kExperts * kEmbd, rng, 2.0f)) {}

  LayerWeights bind(Isa isa) const {
    LayerWeights l;
    l.ffn_gate_inp = f32_matrix(router.data(), kExperts, kEmbd, isa);
    for (int64_t e = 0; e < kExperts; ++e) {
      l.ffn_gate_exps.push_back(f32_matrix(&gate[e * kFf * kEmbd], kFf, kEmbd, isa));
      l.ffn_up_exps.push_back(f32_matrix(&up[e * kFf * kEmbd], kFf, kEmbd, isa));
      l.ffn_down_exps.push_back(f32_matrix(&down[e * kEmbd * kFf], kEmbd, kFf, isa));
    }
    l.ffn_gate_inp_b = {router_b.data(), kExperts};
    l.ffn_gate_exps_b = {gate_b.data(), kExperts * kFf};
    l.ffn_up_exps_b = {up_b.data(), kExperts * kFf};
    l.ffn_down_exps_b = {down_b.data(), kExperts * kEmbd};
    return l;
  }

  // One token's output in double, and the sum of its terms' magnitudes.
  void reference(const float* x, double* out, double* magnitude) const {
    auto dot = [](const float* w, const auto* v, int64_t n) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += double{w[i]} * v[i];
      return s;
    };
    std::vector<double> logits(kExperts);
    for (int64_t e = 0; e < kExperts; ++e)
      logits[e] = dot(&router[e * kEmbd], x, kEmbd) + router_b[e];
    std::vector<int64_t> ids(kExperts);
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(),
                     [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
    double sum = 0;
    for (int64_t i = 0; i < kUsed; ++i) sum += std::exp(logits[ids[i]] - logits[ids[0]]);
    std::fill(out, out + kEmbd, 0.0);
    std::fill(magnitude, magnitude + kEmbd, 0.0);
    for (int64_t i = 0; i < kUsed; ++i) {
      const int64_t e = ids[i];
      const double w = std::exp(logits[e] - logits[ids[0]]) / sum;
      std::vector<double> h(kFf);
      for (int64_t j = 0; j < kFf; ++j) {
        const double g =
            std::min(dot(&gate[(e * kFf + j) * kEmbd], x, kEmbd) + gate_b[e * kFf + j], 7.0);
        const double u =
            std::clamp(dot(&up[(e * kFf + j) * kEmbd], x, kEmbd) + up_b[e * kFf + j], -7.0, 7.0);
        h[j] = g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
      }
      for (int64_t r = 0; r < kEmbd; ++r) {
        const double d = dot(&down[(e * kEmbd + r) * kFf], h.data(), kFf) + down_b[e * kEmbd + r];
        double mag = std::fabs(down_b[e * kEmbd + r]);
        for (int64_t j = 0; j < kFf; ++j) mag += std::fabs(down[(e * kEmbd + r) * kFf + j] * h[j]);
        out[r] += w * d;
        magnitude[r] += w * mag;
      }
    }
  }
};

ModelConfig gpt_oss_config() {
  ModelConfig c;
  c.n_layers = 1;
  c.n_embd = kEmbd;
  c.n_expert = kExperts;
  c.n_expert_used = kUsed;
  c.n_ff_exp = kFf;
  c.expert_gating = ExpertGating::kTopKThenSoftmax;
  c.activation = Activation::kSwigluOai;
  return c;
}

TEST(ExpertFeedForward, GptOssBiasesAndClampedSwigluMatchDouble) {
  std::mt19937 rng(14);
  const GptOssExperts experts(rng);
  const std::vector<float> x = normals(kTokens * kEmbd, rng, 1.0f);
  const ModelConfig config = gpt_oss_config();
  std::vector<double> want(kTokens * kEmbd), magnitude(kTokens * kEmbd);
  for (int64_t t = 0; t < kTokens; ++t)
    experts.reference(&x[t * kEmbd], &want[t * kEmbd], &magnitude[t * kEmbd]);
  for (Isa isa : supported_isas(detect_cpu_features())) {
    ModelWeights weights;
    weights.layers.push_back(experts.bind(isa));
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      ExpertFeedForward ffn(config, weights, kTokens, isa);
      for (int64_t n : {int64_t{1}, kTokens}) {
        std::vector<float> out(kTokens * kEmbd, -1.0f);
        ffn.run(weights.layers[0], x.data(), kEmbd, n, out.data(), kEmbd, pool);
        // f32 chains of at most 64 fmas, swiglu_oai within 20 u, the biases and the weighted
        // sum: far below 1e-4 of the terms' magnitude.
        for (int64_t i = 0; i < n * kEmbd; ++i)
          ASSERT_NEAR(out[i], want[i], 1e-4 * magnitude[i])
              << isa_name(isa) << " threads " << threads << " tokens " << n << " token "
              << i / kEmbd << " r " << i % kEmbd;
      }
    }
  }
}

}  // namespace
}  // namespace drift
