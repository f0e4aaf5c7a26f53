#include "util/memory_bandwidth.h"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "util/huge_pages.h"

namespace drift {

double measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes) {
  const size_t n = buffer_bytes / sizeof(uint64_t);
  // On huge pages, as the weights it is the ceiling for are (util/huge_pages.h).
  struct Free {
    void operator()(uint64_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint64_t[], Free> buffer(
      static_cast<uint64_t*>(allocate_huge_page_backed(n * sizeof(uint64_t))));
  if (!buffer) return 0.0;
  // Touch every page (with a pattern the compiler cannot fold) so the pass measures reads only.
  for (size_t i = 0; i < n; ++i) buffer[i] = i * 0x9e3779b97f4a7c15ull;
  std::vector<uint64_t> sinks(pool.size(), 0);
  double best = 0.0;
  for (int pass = 0; pass < 4; ++pass) {
    auto start = std::chrono::steady_clock::now();
    pool.run([&](int index, int count) {
      Range r = split_range(static_cast<int64_t>(n), index, count);
      // Eight independent accumulators keep several loads in flight per core.
      uint64_t acc[8] = {};
      int64_t i = r.begin;
      for (; i + 8 <= r.end; i += 8)
        for (int j = 0; j < 8; ++j) acc[j] ^= buffer[i + j];
      for (; i < r.end; ++i) acc[0] ^= buffer[i];
      uint64_t sum = 0;
      for (uint64_t a : acc) sum ^= a;
      sinks[index] = sum;
    });
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (pass > 0) best = std::max(best, buffer_bytes / seconds);  // pass 0 warms up
  }
  volatile uint64_t keep = 0;
  for (uint64_t s : sinks) keep = keep ^ s;
  (void)keep;
  return best;
}

}  // namespace drift
