// The knee search past the knee (search_knee.cc): a cost model of a run's
// time per token fitted to the measured points, its optimum, and the
// plateau scan that shows the fit where throughput ends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <vector>

#include "controller/search/knee_reading.h"
#include "controller/search/search.h"

namespace crest::controller::knee {

// Past the knee throughput need not fall at once: when preemptions are
// cheap (a small cache per sequence) it keeps rising for a while. A run's
// time per token is modelled as a / B + c + g * preemptions (the per-step
// cost shared by the batch, the per-token cost, the recompute per
// preemption), fitted by least squares over the measured points near the
// knee, each weighted by its runs. The preemption count is noise-free, so
// the fit averages the throughput noise of every point.
struct CostModel {
  double a = 0;
  double c = 0;
  double g = 0;
  double scale = 1;                        // throughput the costs are relative to
  std::map<int64_t, int64_t> preemptions;  // measured points -> preemptions
  int64_t below = 0;

  // Preemptions at b: 0 up to the knee, linear between measured points.
  std::optional<double> PreemptionsAt(int64_t b) const {
    if (b <= below) return 0.0;
    auto hi = preemptions.lower_bound(b);
    if (hi == preemptions.end()) return std::nullopt;
    if (hi->first == b || hi == preemptions.begin()) return static_cast<double>(hi->second);
    auto lo = std::prev(hi);
    const double t =
        static_cast<double>(b - lo->first) / static_cast<double>(hi->first - lo->first);
    return static_cast<double>(lo->second) + t * static_cast<double>(hi->second - lo->second);
  }
  std::optional<double> Speed(int64_t b) const {
    auto p = PreemptionsAt(b);
    if (!p) return std::nullopt;
    const double cost = a * 1000 / static_cast<double>(b) + c + g * *p / 1000;
    return cost > 0 ? scale / cost : std::optional<double>();
  }
};

// The fit over the points near the knee; nullopt until it has four of them,
// one past the knee, or when they do not have the shape the model assumes.
std::optional<CostModel> FitCost(const Outcomes& finished, const Reading& r);

// The cost model's optimum between the knee and the largest point measured.
std::optional<int64_t> ModelOptimum(const CostModel& m, const Reading& r);

// Where the cost fit places the peak, when preemptions cost something it
// can see.
std::optional<int64_t> PlateauPeak(const Outcomes& finished, const Reading& r);

// Whether preemptions are cheap past the knee: the highest trusted point
// above the bracket's past point fell, from the best mean below the knee, by
// less than kCheapFall per preemption per sequence (or rose). Then a plateau
// may carry the peak well past the knee, and on one node the knee's
// bisection gives way to AnchorBelowKnee (search_knee.cc).
bool CheapPreemptions(const Outcomes& finished, const Reading& r);

// The cost fit's lever below the knee: max(lo, 0.9 x the bracket's lower
// end), nullopt when that is not below it.
std::optional<int64_t> AnchorBelowKnee(const SearchSpace& space, const Reading& r);

// Up to `n` points above `last`, kSpread apart, below the cap and the range's
// end, not measured yet.
std::vector<int64_t> StepsUp(const SearchSpace& space, const Outcomes& finished, int64_t last,
                             size_t n);

// Past the knee: the points that show the cost model where throughput ends,
// then the model's optimum. `n` points at most.
std::vector<int64_t> ModelProbes(const SearchSpace& space, const Outcomes& finished,
                                 const Reading& r, size_t n, bool scan_only = false);

}  // namespace crest::controller::knee
