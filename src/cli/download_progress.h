// The progress of a download on a terminal: one line redrawn in place with the share done, a
// bar, bytes, rate and time left. When stderr is not a terminal (a log file, a pipe, CI) it draws
// nothing; the caller logs a line when the download starts and ends instead.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace drift::cli {

class DownloadProgress {
 public:
  // `label` names what is fetched; `total` may be 0 (unknown).
  DownloadProgress(std::string label, uint64_t total);
  ~DownloadProgress();  // ends the line if one was drawn

  void update(uint64_t done);
  bool on_terminal() const { return on_terminal_; }

 private:
  void draw(uint64_t done);

  std::string label_;
  uint64_t total_;
  bool on_terminal_;
  bool drawn_ = false;
  uint64_t last_done_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

// "93.8 MB", "512 kB": decimal units, as download tools show them.
std::string format_bytes(uint64_t bytes);

}  // namespace drift::cli
