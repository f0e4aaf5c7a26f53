// The per-sequence controller of speculative decoding's draft length: how many tokens the next
// draft may have, from how the last ones fared. A few counters, no allocation.
#pragma once

#include <algorithm>
#include <cstdint>

namespace drift {

// How many tokens the next draft of one sequence may have. It starts at kInitial, doubles (up to
// the maximum) when a whole draft is accepted, and shrinks to one more than what was accepted
// otherwise. After kMaxMisses drafts in a row with nothing accepted it drafts nothing for a
// cool-down of steps, doubled each time it trips again (up to kMaxCooldown) and reset by the
// first accepted token: text that does not repeat itself costs almost nothing.
class AdaptiveDraftLength {
 public:
  static constexpr int32_t kInitial = 4;
  static constexpr int32_t kMaxMisses = 3;
  static constexpr int32_t kFirstCooldown = 8;
  static constexpr int32_t kMaxCooldown = 128;

  explicit AdaptiveDraftLength(int32_t max_len = kInitial)
      : max_(std::max(max_len, 0)), len_(std::min(kInitial, max_)) {}

  // The longest draft the next decode may carry (0 while cooling down).
  int32_t limit() const { return cooldown_ > 0 ? 0 : len_; }
  // A decode step of the sequence that carried no draft.
  void on_step_without_draft() {
    if (cooldown_ > 0) --cooldown_;
  }
  // A draft of `drafted` tokens was verified and the first `accepted` of them kept.
  void on_verified(int32_t drafted, int32_t accepted) {
    if (accepted > 0) {
      misses_ = 0;
      next_cooldown_ = kFirstCooldown;
    }
    if (accepted == drafted) {
      len_ = std::min(max_, std::max(1, len_ * 2));
      return;
    }
    len_ = std::clamp(accepted + 1, 1, max_);
    if (accepted == 0 && ++misses_ >= kMaxMisses) {
      misses_ = 0;
      cooldown_ = next_cooldown_;
      next_cooldown_ = std::min(next_cooldown_ * 2, kMaxCooldown);
    }
  }

 private:
  int32_t max_;
  int32_t len_;
  int32_t misses_ = 0;
  int32_t cooldown_ = 0;
  int32_t next_cooldown_ = kFirstCooldown;
};

}  // namespace drift
