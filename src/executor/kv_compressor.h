// KV-Compress on one sequence's cache: every (layer, KV head) keeps the entries the policy
// chooses (kv/kv_eviction.h), moved down to the first slots of the sequence's page table in
// increasing position (KvPages::move_entry), and its KvHeadTable follows. The pages past the
// longest head's last slot then hold nothing the sequence reads.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_eviction.h"
#include "model/kv_head_table.h"
#include "model/kv_pages.h"

namespace drift {

class KvCompressor {
 public:
  explicit KvCompressor(const KvCompressConfig& config) : config_(config) {}

  const KvCompressConfig& config() const { return config_; }

  // Compresses a sequence holding `seq_len` positions to kv_keep_target(seq_len) entries a head,
  // then starts the metric's next interval. The page table ([groups][pages], KvPages) must cover
  // the table's slots. Returns the slots its longest head now uses.
  int64_t compress(int64_t seq_len, KvHeadTable& heads, KvPages& kv,
                   std::span<const int32_t> page_table);
  // The same with the target given (the scheduler's plan): every head holding more than `target`
  // entries keeps `target`, those at positions below `keep_from` among them, untouched.
  int64_t compress_to(int64_t seq_len, int64_t target, int64_t keep_from, KvHeadTable& heads,
                      KvPages& kv, std::span<const int32_t> page_table);

 private:
  KvCompressConfig config_;
  std::vector<int32_t> kept_;  // one head's kept slots
  std::vector<float> metric_;  // one head's metric, summed over intervals
};

}  // namespace drift
