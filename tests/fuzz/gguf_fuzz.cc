// libFuzzer target for the GGUF reader: any byte string must parse or fail cleanly, and a file
// that parses must only hand out views that lie inside it.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "gguf/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = drift::GgufFile::parse(drift::MappedFile::borrow(data, size));
  if (!file.ok()) return 0;
  const uint8_t* end = data + size;
  volatile uint8_t sink = 0;
  for (const auto& kv : file->metadata()) {
    (void)kv.value.to_display_string();
    if (kv.value.type == drift::GgufType::kArray && kv.value.array.count > 0) {
      const auto& array = kv.value.array;
      if (array.is_integer()) sink ^= static_cast<uint8_t>(array.int_at(array.count - 1));
      if (array.is_float()) {
        double last = array.float_at(array.count - 1);
        uint64_t bits;
        std::memcpy(&bits, &last, sizeof(bits));
        sink ^= static_cast<uint8_t>(bits);
      }
    }
  }
  for (const auto& tensor : file->tensors()) {
    if (tensor.n_bytes == 0) continue;
    if (tensor.data < data || tensor.data + tensor.n_bytes > end) abort();
    sink ^= tensor.data[0];
    sink ^= tensor.data[tensor.n_bytes - 1];
  }
  (void)sink;
  return 0;
}
