#include "controller/search.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace crest::controller {

std::vector<int64_t> StepLadder(const SearchSpace& space) {
  std::vector<int64_t> ladder;
  if (space.step < 1 || space.hi < space.lo) return ladder;
  int64_t p = std::max(space.initial, space.lo);
  while (p <= space.hi && ladder.size() < space.max_points) {
    ladder.push_back(p);
    p = (p / space.step + 1) * space.step;  // round up to the next multiple
  }
  return ladder;
}

SearchDecision StepSearch::Decide(const SearchSpace& space,
                                  const std::map<int64_t, PointOutcome>& finished,
                                  size_t lookahead) const {
  SearchDecision decision;
  std::vector<int64_t> ladder = StepLadder(space);
  double best = -std::numeric_limits<double>::infinity();
  int64_t best_point = 0;
  bool unfinished_seen = false;
  for (int64_t p : ladder) {
    auto it = finished.find(p);
    if (it == finished.end()) {
      unfinished_seen = true;
      if (decision.wanted.size() < lookahead) decision.wanted.push_back(p);
      continue;
    }
    // Points measured ahead of an unfinished one cannot end the search yet:
    // their predecessors might still be better.
    if (unfinished_seen) continue;
    const PointOutcome& o = it->second;
    if (o.kind == PointOutcome::Kind::kInfeasible) {
      decision.done = true;
      decision.reason =
          absl::StrCat("maxBatchSize ", p, " is infeasible",
                       o.reason.empty() ? "" : " (" + o.reason + ")", "; the upward search ends");
      break;
    }
    if (o.kind == PointOutcome::Kind::kFailed) {
      decision.done = true;
      decision.reason =
          absl::StrCat("maxBatchSize ", p, " failed", o.reason.empty() ? "" : " (" + o.reason + ")",
                       "; the upward search ends");
      break;
    }
    if (best_point != 0 && o.objective < best * (1 - space.tolerance)) {
      decision.done = true;
      decision.reason =
          absl::StrFormat("throughput fell at maxBatchSize %d (%.4g < %.4g at %d, tolerance %.3g)",
                          p, o.objective, best, best_point, space.tolerance);
      break;
    }
    if (o.objective > best) {
      best = o.objective;
      best_point = p;
    }
  }
  if (decision.done) {
    decision.wanted.clear();
  } else if (!unfinished_seen) {
    decision.done = true;
    decision.reason = ladder.size() >= space.max_points
                          ? absl::StrCat("max_trials (", space.max_points, ") reached")
                          : absl::StrCat("the range's end (", space.hi, ") reached");
  }
  return decision;
}

size_t StepSearch::PlannedPoints(const SearchSpace& space) const {
  return StepLadder(space).size();
}

absl::StatusOr<std::unique_ptr<SearchStrategy>> MakeStrategy(const std::string& name) {
  if (name == "step" || name.empty()) return std::make_unique<StepSearch>();
  return absl::InvalidArgumentError(absl::StrCat("unknown search strategy '", name, "'"));
}

}  // namespace crest::controller
