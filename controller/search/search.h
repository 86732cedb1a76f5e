// Search strategies over maxBatchSize, per model. A strategy is a pure
// function of what has been measured, so a restarted controller resumes a
// search from the stored trials alone. docs/search.md explains each one.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "controller/search/search_names.h"

namespace crest::controller {

struct SearchSpace {
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t initial = 0;
  int64_t step = 100;
  double tolerance = 0.02;   // relative drop from the best that ends the practice's ladder
  uint32_t max_points = 20;  // benchmark runs per model at most (repeats included)
  // Where the KV-cache knee is expected (kv_blocks.h); 0: unknown, use initial.
  int64_t knee_guess = 0;
  // The knee search ends when its bracket is at most this fraction of
  // maxBatchSize wide (at least 1).
  double resolution = 0.01;
  // Relative noise of one run assumed until repeats measure it.
  double noise_prior = 0.02;
  // Relative noise a busy neighbour slot adds to a run (the spec's
  // search.neighbour_noise): the knee search's band widens by it, in
  // quadrature, once a run was measured beside another job on its node.
  double neighbour_noise = 0;
};

// What the runs of one point came to.
struct PointOutcome {
  enum class Kind { kOk, kInfeasible, kFailed };
  Kind kind = Kind::kOk;
  double objective = 0;  // mean GenerateSpeed over `samples` (over all ok runs when untrusted)
  std::string reason;    // why it is infeasible / failed
  // GenerateSpeed of every trusted ok run.
  std::vector<double> samples;
  // Preemptions during the run (the most over its runs); nullopt when the
  // daemon did not publish them.
  std::optional<int64_t> preemptions;
  // Every ok run carries a trust flag: never evidence of a drop, never best.
  bool untrusted = false;
  // Runs that ended at this point (ok, flagged or not).
  size_t runs = 1;
  // Of its trusted ok runs, those measured beside another job on its node.
  size_t beside_neighbours = 0;
};

using Outcomes = std::map<int64_t, PointOutcome>;

struct SearchDecision {
  // Points still to measure, most urgent first; the first `lookahead` of the
  // unfinished ones (some may be in progress already). A point may be
  // measured already and appear again with more runs wanted (`runs`).
  std::vector<int64_t> wanted;
  // Point -> runs wanted in all, where a strategy wants more than the
  // spec's repeats (a repeat that decides something).
  std::map<int64_t, uint32_t> runs;
  bool done = false;
  std::string reason;  // why the search ended, when done
};

// The point a strategy takes as its answer, and how sure it is.
struct SearchAnswer {
  int64_t point = 0;
  double objective = 0;
  size_t runs = 0;
  std::optional<double> noise;       // relative noise of one run (measured)
  std::optional<double> confidence;  // P(no other point better by > 0.5%)
  // What the answer rests on (KneeSearch::Best; empty for the others):
  // "knee-fit", "knee", "measured" or "practice-ladder" (docs/search.md),
  // and why, in a sentence the report prints.
  std::string basis;
  std::string basis_reason;
};

class SearchStrategy {
 public:
  virtual ~SearchStrategy() = default;
  virtual std::string Name() const = 0;
  // `finished`: point -> outcome for every point whose first `repeats` runs
  // ended (later runs count as they end). `lookahead`: how many points may be
  // measured at once (free nodes).
  virtual SearchDecision Decide(const SearchSpace& space, const Outcomes& finished,
                                size_t lookahead) const = 0;
  // Points this strategy would visit at most (for the progress estimate).
  virtual size_t PlannedPoints(const SearchSpace& space) const = 0;
  // The answer from what is measured: by default the trusted ok point with
  // the highest mean throughput.
  virtual std::optional<SearchAnswer> Best(const SearchSpace& space,
                                           const Outcomes& finished) const;
};

// The practice's ascending search: start at `initial`, then the next multiple
// of `step` above it (435 -> 500 -> 600 ...) up to `hi` and at most
// `max_points`; stop at the first point whose throughput is more than
// `tolerance` below the best so far, or at an infeasible / failed point.
class PracticeSearch final : public SearchStrategy {
 public:
  std::string Name() const override { return "practice"; }
  SearchDecision Decide(const SearchSpace& space, const Outcomes& finished,
                        size_t lookahead) const override;
  size_t PlannedPoints(const SearchSpace& space) const override;
  // The best point of the ladder, its basis "practice-ladder".
  std::optional<SearchAnswer> Best(const SearchSpace& space,
                                   const Outcomes& finished) const override;
};

// Brute force, as a reference: lo, every multiple of `step` inside the
// range, and hi (at most `max_points`, the lowest first).
class GridSearch final : public SearchStrategy {
 public:
  std::string Name() const override { return "grid"; }
  SearchDecision Decide(const SearchSpace& space, const Outcomes& finished,
                        size_t lookahead) const override;
  size_t PlannedPoints(const SearchSpace& space) const override;
};

// Crest's default: brackets the KV-cache knee around its predicted place,
// narrows the bracket to `resolution` by k-section on "past the knee" (any
// preemption; without the signal, a throughput drop beyond the noise band),
// and repeats only the final answer and undecided drops. Infeasible or
// failed points cap the range from above. The answer is the largest point
// below the knee whose throughput is within the noise band of the best.
class KneeSearch final : public SearchStrategy {
 public:
  std::string Name() const override { return "knee"; }
  SearchDecision Decide(const SearchSpace& space, const Outcomes& finished,
                        size_t lookahead) const override;
  size_t PlannedPoints(const SearchSpace& space) const override;
  std::optional<SearchAnswer> Best(const SearchSpace& space,
                                   const Outcomes& finished) const override;
};

// initial, then multiples of step above it, capped at hi and max_points.
std::vector<int64_t> StepLadder(const SearchSpace& space);
// lo, the multiples of step inside (lo, hi), hi; capped at max_points.
std::vector<int64_t> GridPoints(const SearchSpace& space);

// The relative noise of one run pooled over every point with two or more
// samples; nullopt when none has.
std::optional<double> MeasuredNoise(const Outcomes& finished);
// `z` standard errors of the difference of two means of n1 and n2 runs,
// relative: the band within which two points cannot be told apart.
double NoiseBand(double noise, size_t n1, size_t n2, double z = 2.0);
// The answer at `point` (a trusted ok point of `finished`) with its noise
// and how sure it is against every other trusted point.
std::optional<SearchAnswer> QualifiedAnswer(const SearchSpace& space, const Outcomes& finished,
                                            int64_t point);
// A point that can be an answer: ok, trusted, with a run.
bool Usable(const PointOutcome& o);
// Benchmark runs measured (ok or not) over all points.
size_t RunsMeasured(const Outcomes& finished);

// The strategy a name of kStrategyNames (search_names.h) stands for ("" is
// kDefaultStrategy); an unknown name is an error listing the known ones.
absl::StatusOr<std::unique_ptr<SearchStrategy>> MakeStrategy(const std::string& name);

struct ModelState;
// The strategy of one model of a campaign whose search strategy is `name`:
// a WarmStartSearch (warm_start.h) at `state`'s predicted peak when its
// search.prior predicted one, else MakeStrategy(name). A name this build
// does not know (a spec stored by another version) searches as the practice.
std::unique_ptr<SearchStrategy> ModelStrategy(const std::string& name, const ModelState& state);

}  // namespace crest::controller
