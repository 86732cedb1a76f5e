#include "controller/search/search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "controller/search/campaign_records.h"
#include "controller/search/warm_start.h"

namespace crest::controller {
namespace {

// The gap in throughput below which two points count as equally good when
// saying how sure a choice is: finer than any target search-bench checks.
constexpr double kIndifference = 0.005;

double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

}  // namespace

bool Usable(const PointOutcome& o) {
  return o.kind == PointOutcome::Kind::kOk && !o.untrusted && !o.samples.empty();
}

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

std::vector<int64_t> GridPoints(const SearchSpace& space) {
  std::vector<int64_t> points;
  if (space.step < 1 || space.hi < space.lo) return points;
  for (int64_t p = space.lo; p <= space.hi && points.size() < space.max_points;
       p = (p / space.step + 1) * space.step) {
    points.push_back(p);
  }
  if (points.back() != space.hi && points.size() < space.max_points) points.push_back(space.hi);
  return points;
}

std::optional<double> MeasuredNoise(const Outcomes& finished) {
  double sum_sq = 0;
  size_t dof = 0;
  for (const auto& [point, o] : finished) {
    if (!Usable(o) || o.samples.size() < 2) continue;
    double mean = 0;
    for (double s : o.samples) mean += s;
    mean /= static_cast<double>(o.samples.size());
    if (mean <= 0) continue;
    for (double s : o.samples) sum_sq += (s / mean - 1) * (s / mean - 1);
    dof += o.samples.size() - 1;
  }
  if (dof == 0) return std::nullopt;
  return std::sqrt(sum_sq / static_cast<double>(dof));
}

double NoiseBand(double noise, size_t n1, size_t n2, double z) {
  const double a = 1.0 / static_cast<double>(std::max<size_t>(1, n1));
  const double b = 1.0 / static_cast<double>(std::max<size_t>(1, n2));
  return z * noise * std::sqrt(a + b);
}

size_t RunsMeasured(const Outcomes& finished) {
  size_t runs = 0;
  for (const auto& [point, o] : finished) runs += o.runs;
  return runs;
}

std::optional<SearchAnswer> QualifiedAnswer(const SearchSpace& space, const Outcomes& finished,
                                            int64_t point) {
  auto it = finished.find(point);
  if (it == finished.end() || !Usable(it->second)) return std::nullopt;
  SearchAnswer best;
  best.point = point;
  best.objective = it->second.objective;
  best.runs = it->second.samples.size();
  best.noise = MeasuredNoise(finished);
  const double noise = best.noise.value_or(space.noise_prior);
  double sure = 1;
  bool compared = false;
  for (const auto& [other, o] : finished) {
    if (!Usable(o) || other == point) continue;
    const double se = noise * best.objective *
                      std::sqrt(1.0 / static_cast<double>(best.runs) +
                                1.0 / static_cast<double>(o.samples.size()));
    if (se <= 0) continue;
    sure = std::min(sure, NormalCdf((best.objective - o.objective * (1 - kIndifference)) / se));
    compared = true;
  }
  if (compared) best.confidence = sure;
  return best;
}

std::optional<SearchAnswer> SearchStrategy::Best(const SearchSpace& space,
                                                 const Outcomes& finished) const {
  std::optional<int64_t> best;
  for (const auto& [point, o] : finished) {
    if (Usable(o) && (!best || o.objective > finished.at(*best).objective)) best = point;
  }
  if (!best) return std::nullopt;
  return QualifiedAnswer(space, finished, *best);
}

std::optional<SearchAnswer> PracticeSearch::Best(const SearchSpace& space,
                                                 const Outcomes& finished) const {
  std::optional<SearchAnswer> best = SearchStrategy::Best(space, finished);
  if (best) {
    best->basis = "practice-ladder";
    best->basis_reason = absl::StrCat(
        "the best point of the practice's ladder (from ", space.initial, " in steps of ",
        space.step, ", stopping at the first fall beyond ", space.tolerance * 100, "%)");
  }
  return best;
}

SearchDecision PracticeSearch::Decide(const SearchSpace& space, const Outcomes& finished,
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
    // A flagged run says nothing about a fall (docs/search.md).
    if (!o.untrusted && best_point != 0 && o.objective < best * (1 - space.tolerance)) {
      decision.done = true;
      decision.reason =
          absl::StrFormat("throughput fell at maxBatchSize %d (%.4g < %.4g at %d, tolerance %.3g)",
                          p, o.objective, best, best_point, space.tolerance);
      break;
    }
    if (!o.untrusted && o.objective > best) {
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

size_t PracticeSearch::PlannedPoints(const SearchSpace& space) const {
  return StepLadder(space).size();
}

SearchDecision GridSearch::Decide(const SearchSpace& space, const Outcomes& finished,
                                  size_t lookahead) const {
  SearchDecision decision;
  std::vector<int64_t> points = GridPoints(space);
  // Past an infeasible point nothing fits either: the range ends below it.
  int64_t cap = std::numeric_limits<int64_t>::max();
  for (const auto& [point, o] : finished) {
    if (o.kind != PointOutcome::Kind::kOk) cap = std::min(cap, point);
  }
  for (int64_t p : points) {
    if (p >= cap) break;
    if (finished.count(p) == 0 && decision.wanted.size() < lookahead) decision.wanted.push_back(p);
  }
  if (decision.wanted.empty()) {
    decision.done = true;
    decision.reason = cap != std::numeric_limits<int64_t>::max()
                          ? absl::StrCat("every grid point below ", cap, " (",
                                         finished.at(cap).reason, ") measured")
                          : absl::StrCat("every grid point measured (", points.size(), " at step ",
                                         space.step, ")");
  }
  return decision;
}

size_t GridSearch::PlannedPoints(const SearchSpace& space) const {
  return GridPoints(space).size();
}

absl::StatusOr<std::unique_ptr<SearchStrategy>> MakeStrategy(const std::string& name) {
  std::optional<StrategyKind> kind = StrategyKindOf(name.empty() ? kDefaultStrategy : name);
  if (!kind) {
    return absl::InvalidArgumentError(absl::StrCat("unknown search strategy '", name, "' (known: ",
                                                   absl::StrJoin(KnownStrategies(), ", "), ")"));
  }
  // No default: the compiler flags a kind without its strategy.
  switch (*kind) {
    case StrategyKind::kKnee:
      return std::make_unique<KneeSearch>();
    case StrategyKind::kPractice:
      return std::make_unique<PracticeSearch>();
    case StrategyKind::kGrid:
      return std::make_unique<GridSearch>();
  }
  return absl::InternalError(absl::StrCat("search strategy '", name, "': kind ",
                                          static_cast<int>(*kind), " has no strategy"));
}

std::unique_ptr<SearchStrategy> ModelStrategy(const std::string& name, const ModelState& state) {
  if (state.prior_peak > 0) {
    return std::make_unique<WarmStartSearch>(state.prior_peak, state.prior_source);
  }
  absl::StatusOr<std::unique_ptr<SearchStrategy>> strategy = MakeStrategy(name);
  if (!strategy.ok()) return std::make_unique<PracticeSearch>();
  return std::move(*strategy);
}

}  // namespace crest::controller
