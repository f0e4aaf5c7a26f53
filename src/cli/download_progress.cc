#include "download_progress.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace drift::cli {

namespace {

int terminal_columns() {
  winsize size{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  const double b = double(bytes);
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.0f} kB", b / 1e3);
  return fmt::format("{} B", bytes);
}

DownloadProgress::DownloadProgress(std::string label, uint64_t total)
    : label_(std::move(label)),
      total_(total),
      on_terminal_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()) {}

DownloadProgress::~DownloadProgress() {
  if (drawn_) std::fputc('\n', stderr);
}

void DownloadProgress::update(uint64_t done) {
  if (!on_terminal_) return;
  // libcurl reports progress also while no byte arrives (and after the last one): redraw only
  // for new bytes.
  if (drawn_ && done == last_done_) return;
  const auto now = std::chrono::steady_clock::now();
  // Ten redraws a second are smooth; one per received packet would flood the terminal.
  const bool finished = total_ > 0 && done >= total_;
  if (drawn_ && !finished && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  last_done_ = done;
  draw(done);
}

void DownloadProgress::draw(uint64_t done) {
  const double seconds = std::max(1e-3, std::chrono::duration<double>(last_draw_ - start_).count());
  const double rate = double(done) / seconds;
  std::string tail;
  if (total_ > 0) {
    const double left = rate > 0 ? double(total_ - std::min(done, total_)) / rate : 0;
    tail = fmt::format(" {}/{} {}/s {:>3}s left", format_bytes(done), format_bytes(total_),
                       format_bytes(uint64_t(rate)), int64_t(left + 0.5));
  } else {
    tail = fmt::format(" {} {}/s", format_bytes(done), format_bytes(uint64_t(rate)));
  }
  const int columns = terminal_columns();
  std::string head = label_;
  std::string line;
  if (total_ > 0) {
    const double share = std::min(1.0, double(done) / double(total_));
    const int bar = std::max(0, columns - int(head.size() + tail.size()) - 10);
    const int filled = int(share * bar);
    line = fmt::format("{} {:3.0f}% [{}{}]{}", head, share * 100, std::string(filled, '#'),
                       std::string(bar - filled, '.'), tail);
  } else {
    line = head + tail;
  }
  if (int(line.size()) > columns - 1) line.resize(std::max(0, columns - 1));
  // \r and clear-to-end-of-line: the line is redrawn in place.
  fmt::print(stderr, "\r{}\x1b[K", line);
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace drift::cli
