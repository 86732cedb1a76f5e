#include "sim/timing_fit.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"

namespace crest::sim {
namespace {

using Coefficients = std::array<double, kStepCoefficients>;

absl::Status Validate(const std::vector<TimingObservation>& observations) {
  std::set<int> points;
  for (const TimingObservation& o : observations) {
    if (!(o.measured_ms > 0) || !std::isfinite(o.measured_ms)) {
      return absl::InvalidArgumentError(absl::StrCat("timing fit: ", o.label, ": measured time ",
                                                     o.measured_ms, " ms (expected > 0)"));
    }
    if (!(o.weight > 0) || !std::isfinite(o.weight)) {
      return absl::InvalidArgumentError(
          absl::StrCat("timing fit: ", o.label, ": weight ", o.weight, " (expected > 0 runs)"));
    }
    for (double c : o.counts.AsArray()) {
      if (c < 0 || !std::isfinite(c)) {
        return absl::InvalidArgumentError(
            absl::StrCat("timing fit: ", o.label, ": a step count of ", c, " (expected >= 0)"));
      }
    }
    points.insert(o.point);
  }
  if (observations.size() < 2 || points.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "timing fit: ", observations.size(), " observations of ", points.size(),
        " measured points (expected at least two points: one cannot separate a step's fixed "
        "cost from its per-sequence cost)"));
  }
  return absl::OkStatus();
}

// The least squares of relative errors, weighted by runs. The figures of
// one measured point come from the same runs, whose speed (the run-to-run
// noise) scales them together: the point's first figure gives a row for the
// level (counts / measured * sqrt(weight) against sqrt(weight)), each other
// figure a row for its ratio to the first (the difference of their relative
// predictions against 0), which that noise leaves alone.
TimingFit Solve(const std::vector<TimingObservation>& observations, const StepTimeModel& start) {
  const auto m = static_cast<Eigen::Index>(observations.size());
  Eigen::MatrixXd a(m, kStepCoefficients);
  Eigen::VectorXd b(m);
  std::map<int, Eigen::Index> first_of_point;
  for (Eigen::Index i = 0; i < m; ++i) {
    const TimingObservation& o = observations[static_cast<size_t>(i)];
    const double w = std::sqrt(o.weight);
    const Coefficients c = o.counts.AsArray();
    for (size_t j = 0; j < kStepCoefficients; ++j) {
      a(i, static_cast<Eigen::Index>(j)) = c[j] / o.measured_ms * w;
    }
    b(i) = w;
    auto [first, inserted] = first_of_point.try_emplace(o.point, i);
    if (!inserted) {
      const double w0 = std::sqrt(observations[static_cast<size_t>(first->second)].weight);
      a.row(i) -= a.row(first->second) / w0 * w;
      b(i) = 0;
    }
  }
  TimingFit fit;
  fit.status.fill(CoefficientFit::kFitted);
  Coefficients value = start.AsArray();
  double largest_norm = 0;
  for (size_t j = 0; j < kStepCoefficients; ++j) {
    largest_norm = std::max(largest_norm, a.col(static_cast<Eigen::Index>(j)).norm());
  }
  // Each pass either accepts the solution or takes one coefficient out of
  // the free set, so at most kStepCoefficients + 1 passes.
  for (size_t pass = 0; pass <= kStepCoefficients; ++pass) {
    std::vector<size_t> free;
    Eigen::VectorXd rhs = b;
    for (size_t j = 0; j < kStepCoefficients; ++j) {
      if (fit.status[j] == CoefficientFit::kFitted) {
        free.push_back(j);
      } else {
        rhs -= a.col(static_cast<Eigen::Index>(j)) * value[j];
      }
    }
    if (free.empty()) break;
    // Columns scaled to unit norm: the coefficients differ by five orders
    // of magnitude (per context token against per step).
    const auto n = static_cast<Eigen::Index>(free.size());
    Eigen::MatrixXd scaled(m, n);
    Eigen::VectorXd norms(n);
    bool dropped = false;
    for (Eigen::Index k = 0; k < n; ++k) {
      norms(k) = a.col(static_cast<Eigen::Index>(free[static_cast<size_t>(k)])).norm();
      if (norms(k) <= 1e-12 * largest_norm) {
        // Nothing the observations did pays this cost.
        fit.status[free[static_cast<size_t>(k)]] = CoefficientFit::kUndetermined;
        dropped = true;
      } else {
        scaled.col(k) = a.col(static_cast<Eigen::Index>(free[static_cast<size_t>(k)])) / norms(k);
      }
    }
    if (dropped) continue;
    Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(scaled);
    qr.setThreshold(1e-9);
    if (qr.rank() < n) {
      // The columns past the rank are combinations of the others.
      for (Eigen::Index k = qr.rank(); k < n; ++k) {
        fit.status[free[static_cast<size_t>(qr.colsPermutation().indices()(k))]] =
            CoefficientFit::kUndetermined;
      }
      continue;
    }
    const Eigen::VectorXd x = qr.solve(rhs);
    const Eigen::VectorXd residual = rhs - scaled * x;
    const Eigen::Index dof = m - n;
    Eigen::VectorXd se = Eigen::VectorXd::Zero(n);
    if (dof > 0) {
      const double variance = residual.squaredNorm() / static_cast<double>(dof);
      // n <= 7 columns of unit norm: the normal matrix is small and well scaled.
      se = ((scaled.transpose() * scaled).inverse().diagonal() * variance).cwiseSqrt();
    }
    // The coefficient the observations constrain least, beyond kMaxRelativeSe
    // of its value (a negative one counts by its distance from zero), keeps
    // its starting value; then the most negative of the well-constrained is
    // held at zero.
    Eigen::Index loosest = -1;
    double loosest_rel = kMaxRelativeSe;
    Eigen::Index most_negative = -1;
    for (Eigen::Index k = 0; k < n; ++k) {
      const double rel = x(k) != 0 ? se(k) / std::abs(x(k)) : 0;
      if (rel > loosest_rel) {
        loosest = k;
        loosest_rel = rel;
      }
      if (x(k) < 0 && (most_negative < 0 || x(k) < x(most_negative))) most_negative = k;
    }
    if (loosest >= 0) {
      fit.status[free[static_cast<size_t>(loosest)]] = CoefficientFit::kUndetermined;
      continue;
    }
    if (most_negative >= 0) {
      fit.status[free[static_cast<size_t>(most_negative)]] = CoefficientFit::kAtZero;
      value[free[static_cast<size_t>(most_negative)]] = 0;
      continue;
    }
    for (Eigen::Index k = 0; k < n; ++k) {
      const size_t j = free[static_cast<size_t>(k)];
      value[j] = x(k) / norms(k);
      fit.relative_se[j] = x(k) > 0 ? se(k) / x(k) : 0;
    }
    break;
  }
  fit.timing = StepTimeModel::FromArray(value);
  for (const TimingObservation& o : observations) {
    fit.residuals.push_back(fit.timing.Ms(o.counts) / o.measured_ms - 1);
  }
  return fit;
}

}  // namespace

const std::array<std::string_view, kStepCoefficients>& StepCoefficientNames() {
  static constexpr std::array<std::string_view, kStepCoefficients> kNames = {
      "decode_base_ms",     "decode_per_seq_ms",  "decode_per_context_token_ms",
      "prefill_base_ms",    "prefill_per_seq_ms", "prefill_per_token_ms",
      "preempt_overhead_ms"};
  return kNames;
}

absl::StatusOr<TimingFit> FitStepTimes(const std::vector<TimingObservation>& observations,
                                       const StepTimeModel& start) {
  if (absl::Status s = Validate(observations); !s.ok()) return s;
  TimingFit fit = Solve(observations, start);
  std::set<int> points;
  for (const TimingObservation& o : observations) points.insert(o.point);
  if (points.size() >= 3) {
    double sum_sq = 0;
    size_t count = 0;
    for (int left_out : points) {
      std::vector<TimingObservation> rest;
      for (const TimingObservation& o : observations) {
        if (o.point != left_out) rest.push_back(o);
      }
      const TimingFit others = Solve(rest, start);
      for (const TimingObservation& o : observations) {
        if (o.point != left_out) continue;
        const double e = others.timing.Ms(o.counts) / o.measured_ms - 1;
        sum_sq += e * e;
        ++count;
      }
    }
    fit.leave_one_out_rms = std::sqrt(sum_sq / static_cast<double>(count));
  }
  return fit;
}

}  // namespace crest::sim
