// What a step costs, learned online from the steps the engine runs:
//
//   seconds ≈ per_step + per_prefill_token * prefill tokens + per_decode_sequence * decodes
//             + per_attended_position * positions attended over (attention's quadratic part)
//
// fitted by least squares of relative error over every step seen, each step's weight decaying
// by `decay` per later step (an exponential moving average of the normal equations, so the model
// follows a machine whose speed changes — another process, a thermal limit — within
// ~1/(1-decay) steps).
// Costs are never negative (the fit is constrained); attention's is learned only from steps that
// attend over many positions. The engine owns one per model and thread
// count (one per engine); the scheduler only ever sees the token budget derived from it.
// observe and predict allocate nothing.
#pragma once

#include <array>
#include <cstdint>

namespace drift {

// The quantities a step's time depends on.
struct StepShape {
  int64_t prefill_tokens = 0;
  int64_t decode_sequences = 0;
  // Sum over the step's tokens of the positions each attends over (a token at position p attends
  // over p + 1 positions).
  int64_t attended_positions = 0;
};

// Seconds; all >= 0.
struct StepCosts {
  double per_step = 0;
  double per_prefill_token = 0;
  double per_decode_sequence = 0;
  double per_attended_position = 0;

  double seconds(const StepShape& shape) const {
    return per_step + per_prefill_token * double(shape.prefill_tokens) +
           per_decode_sequence * double(shape.decode_sequences) +
           per_attended_position * double(shape.attended_positions);
  }
};

class StepCostModel {
 public:
  // decay in (0, 1): the weight of a step after each later one.
  explicit StepCostModel(double decay = 0.97);

  // A step of this shape took `seconds` (ignored unless finite and > 0).
  void observe(const StepShape& shape, double seconds);

  // Ready once it has seen steps with prefill tokens and with decodes, so that both costs are
  // measured rather than guessed. Before that, costs() are all zero.
  bool calibrated() const;
  const StepCosts& costs() const { return costs_; }
  double predict(const StepShape& shape) const { return costs_.seconds(shape); }
  uint64_t steps_observed() const { return steps_; }

 private:
  static constexpr int kTerms = 4;  // per_step, prefill, decode, attended
  using Vector = std::array<double, kTerms>;
  using Matrix = std::array<Vector, kTerms>;

  void refit();

  double decay_;
  Matrix gram_{};                // decayed, weighted sum of x x^T over steps, x the scaled shape
  Vector moment_{};              // decayed, weighted sum of x * seconds
  bool attention_seen_ = false;  // a step attended over enough positions to fit its cost
  StepCosts costs_;
  uint64_t steps_ = 0;
  uint64_t prefill_steps_ = 0;
  uint64_t decode_steps_ = 0;
};

}  // namespace drift
