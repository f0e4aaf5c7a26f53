// What a model's K/V depends on besides its tokens and the KV layout, as one digest: every
// tensor's name, type, shape and bytes, and the RoPE settings. A disk tier keeps pages of
// different weights (another file, another quantization, a fine-tune of the same shape) apart by
// it. Reads every weight byte once (XXH3, about 0.1 s per GB): done only when a tier is on.
#pragma once

#include "kv/kv_digest.h"

namespace drift {

class Model;

KVDigest model_kv_identity(const Model& model);

}  // namespace drift
