#include "engine/step_cost_model.h"

#include <cmath>
#include <limits>
#include <utility>

namespace drift {

namespace {

// Shapes are scaled so that a typical step has terms of order one: the normal equations stay
// well conditioned although attended positions run into the millions.
constexpr double kScale[4] = {1.0, 1.0 / 256, 1.0 / 16, 1.0 / 65536};

// The attention cost is held at zero until a step has attended over this many positions (a
// 724-token prefill, or 64 sequences at 4k context): after a few short steps, prefill time is
// explained as well by attended positions (quadratic) as by tokens (linear), and extrapolating
// the quadratic from a 51-token warm-up to a 600-token prompt overestimates it ten times.
constexpr int64_t kAttentionEvidence = int64_t{1} << 18;

// Solves a[n][n] x = b in place (Gaussian elimination, partial pivoting); false if singular.
template <typename Matrix, typename Vector>
bool solve(Matrix& a, Vector& b, int n) {
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    for (int r = col + 1; r < n; ++r)
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    if (std::abs(a[pivot][col]) < 1e-300) return false;
    std::swap(a[col], a[pivot]);
    std::swap(b[col], b[pivot]);
    for (int r = col + 1; r < n; ++r) {
      const double f = a[r][col] / a[col][col];
      for (int c = col; c < n; ++c) a[r][c] -= f * a[col][c];
      b[r] -= f * b[col];
    }
  }
  for (int r = n - 1; r >= 0; --r) {
    for (int c = r + 1; c < n; ++c) b[r] -= a[r][c] * b[c];
    b[r] /= a[r][r];
  }
  return true;
}

}  // namespace

StepCostModel::StepCostModel(double decay) : decay_(decay) {}

void StepCostModel::observe(const StepShape& shape, double seconds) {
  if (!std::isfinite(seconds) || seconds <= 0) return;
  const Vector x = {kScale[0], double(shape.prefill_tokens) * kScale[1],
                    double(shape.decode_sequences) * kScale[2],
                    double(shape.attended_positions) * kScale[3]};
  // Weighted by 1 / seconds^2: the fit minimizes relative error, so a 5 ms decode step is
  // predicted as well as a 1 s prefill (unweighted, the long steps' noise would swamp the short
  // ones, which are the steps the inter-token target is about).
  const double w = 1.0 / (seconds * seconds);
  for (int i = 0; i < kTerms; ++i) {
    for (int j = 0; j < kTerms; ++j) gram_[i][j] = decay_ * gram_[i][j] + w * x[i] * x[j];
    moment_[i] = decay_ * moment_[i] + w * x[i] * seconds;
  }
  attention_seen_ = attention_seen_ || shape.attended_positions >= kAttentionEvidence;
  ++steps_;
  prefill_steps_ += shape.prefill_tokens > 0;
  decode_steps_ += shape.decode_sequences > 0;
  refit();
}

bool StepCostModel::calibrated() const { return prefill_steps_ >= 1 && decode_steps_ >= 1; }

void StepCostModel::refit() {
  // Rule: the non-negative least-squares fit. With four terms, every subset of free terms is
  // tried (the others held at zero) and the feasible solution of least error wins — the exact
  // answer, in 16 small solves, without an iterative method's tolerances.
  Vector best{};
  double best_error = 0;  // of theta = 0
  for (unsigned subset = 1; subset < (1u << kTerms); ++subset) {
    if (!attention_seen_ && (subset & (1u << 3))) continue;
    int index[kTerms];
    int n = 0;
    for (int i = 0; i < kTerms; ++i)
      if (subset & (1u << i)) index[n++] = i;
    std::array<std::array<double, kTerms>, kTerms> a{};
    std::array<double, kTerms> b{};
    for (int r = 0; r < n; ++r) {
      for (int c = 0; c < n; ++c) a[r][c] = gram_[index[r]][index[c]];
      // A whisper of ridge: a term no step has exercised yet stays at zero instead of making
      // the system singular.
      a[r][r] += 1e-9 + 1e-9 * gram_[index[r]][index[r]];
      b[r] = moment_[index[r]];
    }
    if (!solve(a, b, n)) continue;
    Vector theta{};
    bool feasible = true;
    for (int r = 0; r < n; ++r) {
      feasible = feasible && b[r] >= 0 && std::isfinite(b[r]);
      theta[index[r]] = b[r];
    }
    if (!feasible) continue;
    // Squared error up to a constant: theta' G theta - 2 m' theta.
    double error = 0;
    for (int i = 0; i < kTerms; ++i) {
      for (int j = 0; j < kTerms; ++j) error += theta[i] * gram_[i][j] * theta[j];
      error -= 2 * moment_[i] * theta[i];
    }
    if (error < best_error) {
      best_error = error;
      best = theta;
    }
  }
  costs_ =
      StepCosts{best[0] * kScale[0], best[1] * kScale[1], best[2] * kScale[2], best[3] * kScale[3]};
}

}  // namespace drift
