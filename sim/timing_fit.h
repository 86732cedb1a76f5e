// Fits a profile's step-time coefficients (StepTimeModel) to measured runs.
// A run's time, its mean first-token time and its mean decode time are
// linear in the coefficients, given what its steps did (StepCounts, from one
// noise-free SimulateWorkload of the run's configuration), so the fit is a
// least squares of relative errors weighted by runs, with non-negative
// coefficients. The starting model is a prior: a coefficient the
// observations cannot pin down stays at (or near) its starting value, and
// the result says which.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "sim/profile.h"

namespace crest::sim {

// The coefficients' names as profiles spell them, in StepCounts' order.
const std::array<std::string_view, kStepCoefficients>& StepCoefficientNames();

// One measured figure as a time: a run's elapsed time (from GenerateSpeed),
// its mean FirstTokenTime or its mean DecodeTime.
struct TimingObservation {
  std::string label;       // says which figure of which point, for messages
  StepCounts counts;       // what the steps behind the figure did
  double measured_ms = 0;  // the figure
  double weight = 1;       // the runs behind it
  int point = 0;           // the measured point it belongs to (leave-one-out)
};

enum class CoefficientFit {
  kFitted,        // from the observations
  kUndetermined,  // at or near the starting value: the observations hardly see it
  kAtZero,        // the observations want it below zero
};

struct TimingFit {
  StepTimeModel timing;
  std::array<CoefficientFit, kStepCoefficients> status{};
  // One standard error over the value, for fitted coefficients (from the
  // residuals; 0 when the fit is exact or has no degree of freedom left).
  std::array<double, kStepCoefficients> relative_se{};
  std::vector<double> residuals;  // per observation: predicted / measured - 1
  // Leaving each measured point out in turn, the root mean square of its
  // observations' relative errors as predicted by the fit of the others;
  // none with fewer than three points.
  std::optional<double> leave_one_out_rms;
};

// A coefficient whose standard error exceeds this share of its value is
// taken as undetermined: the observations hardly constrain it.
constexpr double kMaxRelativeSe = 0.25;
// The prior's weight: moving a coefficient kPriorRelativeSd of its starting
// value costs as much as kRunNoise, one run's relative noise, in one
// observation.
constexpr double kRunNoise = 0.02;
constexpr double kPriorRelativeSd = 2;

// Fits the coefficients to `observations` from `start`. INVALID_ARGUMENT
// naming the observation for a non-positive time or weight or a negative
// count, and when there are fewer observations than two (or fewer measured
// points than two).
absl::StatusOr<TimingFit> FitStepTimes(const std::vector<TimingObservation>& observations,
                                       const StepTimeModel& start);

}  // namespace crest::sim
