#include "runtime/model_identity.h"

#include <cstring>
#include <vector>

#include "model/model.h"

namespace drift {
namespace {

// Folds `bytes` into `state` (a chain of XXH3-128 digests, each seeded by the last).
void fold(KVDigest& state, const void* bytes, size_t n) {
  const KVDigest next =
      kv_digest_bytes({static_cast<const uint8_t*>(bytes), n}, state.lo ^ state.hi);
  state = KVDigest{state.lo ^ next.lo, next.hi};
}

}  // namespace

KVDigest model_kv_identity(const Model& model) {
  KVDigest state;
  for (const GgufTensor& t : model.file().tensors()) {
    fold(state, t.name.data(), t.name.size());
    const uint64_t shape[6] = {uint64_t(t.type), t.ne[0], t.ne[1], t.ne[2], t.ne[3], t.n_bytes};
    fold(state, shape, sizeof(shape));
    fold(state, t.data, size_t(t.n_bytes));
  }
  const ModelConfig& c = model.config();
  std::vector<double> rope = {double(c.rope_dims),       double(c.rope_freq_scale),
                              double(c.rope_ext_factor), double(c.rope_attn_factor),
                              double(c.rope_n_ctx_orig), double(int(c.rope_layout))};
  for (const LayerConfig& layer : c.layers) {
    rope.push_back(layer.rope_base);
    rope.push_back(layer.rope_corr_dims[0]);
    rope.push_back(layer.rope_corr_dims[1]);
  }
  fold(state, rope.data(), rope.size() * sizeof(double));
  return state;
}

}  // namespace drift
