#include "kv_events/kv_event_encoding.h"

#include <msgpack.hpp>

namespace drift {

namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

void pack_key(Packer& p, std::string_view key) {
  p.pack_str(uint32_t(key.size()));
  p.pack_str_body(key.data(), uint32_t(key.size()));
}

void pack_hash_list(Packer& p, uint64_t hash) {
  p.pack_array(1);
  p.pack_uint64(hash);
}

std::string_view medium_name(KVMedium medium) { return medium == KVMedium::kDisk ? "DISK" : "GPU"; }

void pack_block_stored(Packer& p, const KVEvent& e, int32_t block_size) {
  p.pack_map(9);
  pack_key(p, "type");
  pack_key(p, "BlockStored");
  pack_key(p, "block_hashes");
  pack_hash_list(p, e.hash);
  pack_key(p, "parent_block_hash");
  if (e.has_parent) {
    p.pack_uint64(e.parent_hash);
  } else {
    p.pack_nil();
  }
  pack_key(p, "token_ids");
  p.pack_array(uint32_t(e.tokens.size()));
  for (TokenId t : e.tokens) p.pack_int32(t);
  pack_key(p, "block_size");
  p.pack_int32(block_size);
  pack_key(p, "lora_id");
  p.pack_nil();
  pack_key(p, "medium");
  pack_key(p, medium_name(e.medium));
  pack_key(p, "lora_name");
  p.pack_nil();
  pack_key(p, "group_idx");
  p.pack_int32(0);
}

void pack_block_removed(Packer& p, const KVEvent& e) {
  p.pack_map(4);
  pack_key(p, "type");
  pack_key(p, "BlockRemoved");
  pack_key(p, "block_hashes");
  pack_hash_list(p, e.hash);
  pack_key(p, "medium");
  pack_key(p, medium_name(e.medium));
  pack_key(p, "group_idx");
  p.pack_int32(0);
}

void pack_all_blocks_cleared(Packer& p) {
  p.pack_map(1);
  pack_key(p, "type");
  pack_key(p, "AllBlocksCleared");
}

}  // namespace

std::string encode_kv_event_batch(std::span<const KVEvent> events, double timestamp,
                                  int32_t block_size, int32_t rank) {
  msgpack::sbuffer buffer;
  Packer p(buffer);
  p.pack_array(3);
  p.pack_double(timestamp);
  p.pack_array(uint32_t(events.size()));
  for (const KVEvent& e : events) {
    switch (e.kind) {
      case KVEventKind::kBlockStored:
        pack_block_stored(p, e, block_size);
        break;
      case KVEventKind::kBlockRemoved:
        pack_block_removed(p, e);
        break;
      case KVEventKind::kAllBlocksCleared:
        pack_all_blocks_cleared(p);
        break;
    }
  }
  p.pack_int32(rank);
  return std::string(buffer.data(), buffer.size());
}

}  // namespace drift
