// What one forward pass computes: a flat batch of tokens from one or more sequences, each
// sequence's tokens contiguous and at consecutive positions, with the page table through which
// its K/V are written and read.
#pragma once

#include <cstdint>
#include <span>

#include "model/kv_head_table.h"

namespace drift {

struct ForwardSequence {
  int64_t token_begin = 0;  // first of this sequence's tokens in ForwardBatch::tokens
  int64_t n_tokens = 0;     // > 0
  int64_t start_pos = 0;    // position of the first token; K/V of [0, start_pos) are in the pages
  // Physical pages covering [0, start_pos + n_tokens), one list per KV group (KvPages):
  // [groups][pages]; -1 where a sliding group freed a page no query of the batch reads.
  std::span<const int32_t> page_table;
  bool want_logits = false;  // compute logits for the sequence's last token
  bool all_logits = false;   // ... or for every one of its tokens (perplexity)
  // Its tokens [hidden_begin, hidden_begin + n_hidden) (counted from its first token in the
  // batch) whose final normalised hidden state — the LM head's input — is wanted (embeddings).
  int64_t hidden_begin = 0;
  int64_t n_hidden = 0;
  // A compressed sequence (KV-Compress): each (layer, KV head) holds the entries the table lists,
  // at slots [0, length) of page_table, and the batch's tokens go to the next slots of every head
  // (run() appends them to the table). Null: position p is at slot p in every head.
  KvHeadTable* heads = nullptr;
  // The last metric_tokens of its tokens add their squared attention to heads' metric (0: none).
  int64_t metric_tokens = 0;
};

struct ForwardBatch {
  std::span<const int32_t> tokens;             // [n_tokens] token ids
  std::span<const ForwardSequence> sequences;  // covering `tokens` in order
};

}  // namespace drift
