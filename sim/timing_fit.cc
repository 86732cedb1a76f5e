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

// The rows of the least squares of relative errors, weighted by runs. The
// figures of one measured point come from the same runs, whose speed (the
// run-to-run noise) scales them together: the point's first figure gives a
// row for the level (counts / measured * sqrt(weight) against
// sqrt(weight)), each other figure a row for its ratio to the first (the
// difference of their relative predictions against 0), which that noise
// leaves alone.
struct Rows {
  Eigen::MatrixXd a;
  Eigen::VectorXd b;
};

Rows RowsOf(const std::vector<TimingObservation>& observations) {
  const auto m = static_cast<Eigen::Index>(observations.size());
  Rows rows{Eigen::MatrixXd(m, kStepCoefficients), Eigen::VectorXd(m)};
  std::map<int, Eigen::Index> first_of_point;
  for (Eigen::Index i = 0; i < m; ++i) {
    const TimingObservation& o = observations[static_cast<size_t>(i)];
    const double w = std::sqrt(o.weight);
    const Coefficients c = o.counts.AsArray();
    for (size_t j = 0; j < kStepCoefficients; ++j) {
      rows.a(i, static_cast<Eigen::Index>(j)) = c[j] / o.measured_ms * w;
    }
    rows.b(i) = w;
    auto [first, inserted] = first_of_point.try_emplace(o.point, i);
    if (!inserted) {
      const double w0 = std::sqrt(observations[static_cast<size_t>(first->second)].weight);
      rows.a.row(i) -= rows.a.row(first->second) / w0 * w;
      rows.b(i) = 0;
    }
  }
  return rows;
}

TimingFit Solve(const std::vector<TimingObservation>& observations, const StepTimeModel& start) {
  const auto m = static_cast<Eigen::Index>(observations.size());
  const Rows rows = RowsOf(observations);
  const Eigen::MatrixXd& a = rows.a;
  const Eigen::VectorXd& b = rows.b;
  TimingFit fit;
  fit.status.fill(CoefficientFit::kFitted);
  const Coefficients start_value = start.AsArray();
  Coefficients value = start_value;
  std::array<bool, kStepCoefficients> held{};  // at zero, or at a start of zero
  double largest_norm = 0;
  for (size_t j = 0; j < kStepCoefficients; ++j) {
    largest_norm = std::max(largest_norm, a.col(static_cast<Eigen::Index>(j)).norm());
  }
  // Each pass either accepts the solution or holds one more coefficient at
  // zero, so at most kStepCoefficients + 1 passes.
  for (size_t pass = 0; pass <= kStepCoefficients; ++pass) {
    std::vector<size_t> free;
    Eigen::VectorXd rhs = b;
    for (size_t j = 0; j < kStepCoefficients; ++j) {
      const bool paid = a.col(static_cast<Eigen::Index>(j)).norm() > 1e-12 * largest_norm;
      if (!paid) {
        // Nothing the observations did pays this cost: the start's value.
        fit.status[j] = CoefficientFit::kUndetermined;
        value[j] = start_value[j];
      }
      if (paid && !held[j]) {
        free.push_back(j);
      } else {
        rhs -= a.col(static_cast<Eigen::Index>(j)) * value[j];
      }
    }
    if (free.empty()) break;
    // Columns scaled to unit norm: the coefficients differ by five orders
    // of magnitude (per context token against per step).
    const auto n = static_cast<Eigen::Index>(free.size());
    Eigen::MatrixXd scaled = Eigen::MatrixXd::Zero(m + n, n);
    Eigen::VectorXd target = Eigen::VectorXd::Zero(m + n);
    target.head(m) = rhs;
    Eigen::VectorXd norms(n);
    for (Eigen::Index k = 0; k < n; ++k) {
      const auto j = static_cast<Eigen::Index>(free[static_cast<size_t>(k)]);
      norms(k) = a.col(j).norm();
      scaled.col(k).head(m) = a.col(j) / norms(k);
    }
    // The observations' own noise: the residual of their least squares
    // alone. A column they make a combination of the others is undetermined
    // however small it is (exact observations have none).
    Eigen::ColPivHouseholderQR<Eigen::MatrixXd> data_qr(scaled.topRows(m));
    data_qr.setThreshold(1e-9);
    const Eigen::VectorXd data_residual = rhs - scaled.topRows(m) * data_qr.solve(rhs);
    const double variance = data_residual.squaredNorm() /
                            static_cast<double>(std::max<Eigen::Index>(1, m - data_qr.rank()));
    std::vector<bool> combination(static_cast<size_t>(n), false);
    for (Eigen::Index k = data_qr.rank(); k < n; ++k) {
      combination[static_cast<size_t>(data_qr.colsPermutation().indices()(k))] = true;
    }
    // Below the observations, one prior row per coefficient with a starting
    // value: moving kPriorRelativeSd of it costs as much as one run's noise
    // in one observation. Directions the observations hardly see then stay
    // at the start; the others follow the observations. (Scaling the rows
    // by the residual's own noise instead let a campaign of four points,
    // whose residual is small by chance, trade a prefill cost per token for
    // one per sequence tenfold: decision 0029.)
    for (Eigen::Index k = 0; k < n; ++k) {
      const double z0 = start_value[free[static_cast<size_t>(k)]] * norms(k);
      if (z0 > 0) {
        const double lambda = kRunNoise / kPriorRelativeSd / z0;
        scaled(m + k, k) = lambda;
        target(m + k) = lambda * z0;
      }
    }
    Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(scaled);
    qr.setThreshold(1e-9);
    if (qr.rank() < n) {
      // Columns that are combinations of the others, with no prior row to
      // tell them apart (exact observations, or a start of zero): they keep
      // the start and the rest is solved again.
      for (Eigen::Index k = qr.rank(); k < n; ++k) {
        const size_t j = free[static_cast<size_t>(qr.colsPermutation().indices()(k))];
        fit.status[j] = CoefficientFit::kUndetermined;
        held[j] = true;
        value[j] = start_value[j];
      }
      continue;
    }
    const Eigen::VectorXd z = qr.solve(target);
    Eigen::Index most_negative = -1;
    for (Eigen::Index k = 0; k < n; ++k) {
      if (z(k) < 0 && (most_negative < 0 || z(k) < z(most_negative))) most_negative = k;
    }
    if (most_negative >= 0) {
      const size_t j = free[static_cast<size_t>(most_negative)];
      fit.status[j] = CoefficientFit::kAtZero;
      held[j] = true;
      value[j] = 0;
      continue;
    }
    // Standard errors with the prior: a direction the observations do not
    // see keeps about kPriorRelativeSd of its value.
    const Eigen::VectorXd se =
        ((scaled.transpose() * scaled).inverse().diagonal() * variance).cwiseSqrt();
    for (Eigen::Index k = 0; k < n; ++k) {
      const size_t j = free[static_cast<size_t>(k)];
      value[j] = z(k) / norms(k);
      const double rel = z(k) > 0 ? se(k) / z(k) : std::numeric_limits<double>::infinity();
      if (combination[static_cast<size_t>(k)] || rel > kMaxRelativeSe) {
        fit.status[j] = CoefficientFit::kUndetermined;
      } else {
        fit.relative_se[j] = rel;
      }
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
