// Measures the machine's memory read bandwidth: the ceiling for single-stream decode, which reads
// every weight once per token. Recorded next to every benchmark figure.
#pragma once

#include "util/thread_pool.h"

namespace drift {

// Bytes per second read by `pool` streaming over a buffer much larger than the last-level cache.
// Takes about half a second; the best of a few passes is returned (0 if the buffer cannot be
// allocated). The buffer is on huge pages, as the weights are.
double measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes = size_t{512} << 20);

}  // namespace drift
