// Stop strings for streamed text. Generated text arrives in deltas that need not line up with a
// stop string (one may span several tokens), so text is held back while its end could still be
// the beginning of a stop string, and released once it cannot. When a stop string completes,
// everything before it is released and nothing from it on.
//
// Deltas are whole UTF-8 characters and stop strings are valid UTF-8, so every cut this makes
// (a match start, the start of a held-back prefix) falls on a character boundary.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace drift {

class StopStringMatcher {
 public:
  // Empty strings must have been rejected by the caller; they are ignored here.
  explicit StopStringMatcher(std::vector<std::string> stops);

  struct Output {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string completed; no more text follows
    std::string matched;   // which one (the first in the caller's order among the earliest)
  };

  // Adds a delta. After `stopped`, later calls return nothing.
  Output push(std::string_view delta);
  // The generation ended without a stop string: everything held back.
  std::string flush();

  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // text received but not yet released
  bool stopped_ = false;
};

}  // namespace drift
