#include "engine/stop_string_matcher.h"

#include <algorithm>

namespace drift {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

StopStringMatcher::Output StopStringMatcher::push(std::string_view delta) {
  Output out;
  if (stopped_) return out;
  pending_.append(delta);
  // A match can only involve pending text: released text was checked when it was held.
  size_t earliest = std::string::npos;
  for (const std::string& stop : stops_) {
    if (const size_t at = pending_.find(stop); at < earliest) {
      earliest = at;
      out.matched = stop;
    }
  }
  if (earliest != std::string::npos) {
    out.text = pending_.substr(0, earliest);
    out.stopped = stopped_ = true;
    pending_.clear();
    return out;
  }
  // Hold back the longest tail of pending_ that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& stop : stops_) {
    const size_t max_k = std::min(stop.size() - 1, pending_.size());
    for (size_t k = max_k; k > hold; --k) {
      if (std::string_view(pending_).substr(pending_.size() - k) ==
          std::string_view(stop).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  out.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopStringMatcher::flush() {
  std::string rest;
  if (!stopped_) rest.swap(pending_);
  return rest;
}

}  // namespace drift
