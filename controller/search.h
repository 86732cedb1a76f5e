// Search strategies over maxBatchSize, per model. A strategy is a pure
// function of what has been measured, so a restarted controller resumes a
// search from the stored trials alone. The next issue adds more strategies
// behind the same interface.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "controller/search_names.h"

namespace crest::controller {

struct SearchSpace {
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t initial = 0;
  int64_t step = 100;
  double tolerance = 0.02;  // relative drop from the best that ends the search
  uint32_t max_points = 20;
};

// What all repeats of one point came to.
struct PointOutcome {
  enum class Kind { kOk, kInfeasible, kFailed };
  Kind kind = Kind::kOk;
  double objective = 0;  // mean GenerateSpeed over the point's repeats
  std::string reason;    // why it is infeasible / failed
};

struct SearchDecision {
  // Points still to measure, most urgent first; the first `lookahead` of the
  // unfinished ones (some may be in progress already).
  std::vector<int64_t> wanted;
  bool done = false;
  std::string reason;  // why the search ended, when done
};

class SearchStrategy {
 public:
  virtual ~SearchStrategy() = default;
  virtual std::string Name() const = 0;
  // `finished`: point -> outcome for every point whose repeats all ended.
  // `lookahead`: how many unfinished points may be measured at once.
  virtual SearchDecision Decide(const SearchSpace& space,
                                const std::map<int64_t, PointOutcome>& finished,
                                size_t lookahead) const = 0;
  // Points this strategy would visit at most (for the progress estimate).
  virtual size_t PlannedPoints(const SearchSpace& space) const = 0;
};

// The practice's ascending search: start at `initial`, then the next multiple
// of `step` above it (435 -> 500 -> 600 ...) up to `hi` and at most
// `max_points`; stop at the first point whose throughput is more than
// `tolerance` below the best so far, or at an infeasible / failed point.
class StepSearch final : public SearchStrategy {
 public:
  std::string Name() const override { return "step"; }
  SearchDecision Decide(const SearchSpace& space, const std::map<int64_t, PointOutcome>& finished,
                        size_t lookahead) const override;
  size_t PlannedPoints(const SearchSpace& space) const override;
};

// initial, then multiples of step above it, capped at hi and max_points.
std::vector<int64_t> StepLadder(const SearchSpace& space);

absl::StatusOr<std::unique_ptr<SearchStrategy>> MakeStrategy(const std::string& name);

}  // namespace crest::controller
