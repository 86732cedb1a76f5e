// KneeSearch (search.h): the peak of MindIE's throughput over maxBatchSize
// sits at the KV-cache knee, the largest batch whose contexts still fit in
// npuBlockNum blocks. Below it throughput rises with the batch; past it the
// engine preempts and recomputes and throughput falls off a cliff. So the
// search is a root-finding on "past the knee", which the preemption count
// answers almost free of noise; throughput answers it too, more weakly.
#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "controller/search/knee_cost_model.h"
#include "controller/search/knee_probes.h"
#include "controller/search/knee_reading.h"
#include "controller/search/search.h"

namespace crest::controller {
namespace {

// Runs after which the cost model's probes stop (the answer's confirmation
// follows) on one node, within kRunBudget; two more per extra node, whose
// rounds measure several points at once.
constexpr size_t kRefineBudget = 8;

// The runs a search may spend on one node, each a trial of minutes on a real
// server: a disagreement between the cost model and the runs is settled
// within it.
constexpr size_t kRunBudget = 10;

// Runs of each side of a disagreement between the cost model and the runs.
constexpr uint32_t kSettlingRuns = 3;

// The measured point the cost model ranks first, and the answer after the
// runs have had their say (knee::MeasuredBetter): they differ when a point
// measured better beyond the band than the model's pick.
struct Pick {
  int64_t model;
  int64_t measured;
};
std::optional<Pick> ModelPick(const SearchSpace& space, const Outcomes& finished,
                              const knee::CostModel& m) {
  std::optional<int64_t> top;
  double top_speed = 0;
  for (const auto& [point, o] : finished) {
    if (o.kind != PointOutcome::Kind::kOk || o.untrusted || o.samples.empty()) continue;
    auto v = m.Speed(point);
    if (v && *v > top_speed) {
      top_speed = *v;
      top = point;
    }
  }
  if (!top) return std::nullopt;
  return Pick{*top, knee::MeasuredBetter(space, finished, *top)};
}

// A finished search and why it ended.
SearchDecision Ended(std::string reason) {
  SearchDecision d;
  d.done = true;
  d.reason = std::move(reason);
  return d;
}

// What one decision reads from the finished points before it chooses.
struct RoundReading {
  size_t k = 1;                // runs the round may propose
  std::optional<double> wide;  // knee::WideSpacing
  knee::Reading r;
  bool by_knee = false;  // the probes follow the knee, not throughput's peak
};

// The round's probes; when there are none, what the search located.
struct NextProbes {
  std::vector<int64_t> points;
  std::string located;
};

RoundReading ReadRound(const SearchSpace& space, const Outcomes& finished, size_t lookahead) {
  RoundReading round;
  // A round never proposes more runs than max_trials leaves, and the first
  // leaves half of them to a knee outside its window.
  round.k = finished.empty()
                ? knee::FirstRound(space, lookahead)
                : std::clamp<size_t>(lookahead, 1, space.max_points - RunsMeasured(finished));
  round.wide = knee::WideSpacing(space, lookahead);
  round.r = knee::Read(space, finished);
  // Until a point measures ok, only infeasible points are known: they are
  // past the knee either way.
  round.by_knee = round.r.signal || knee::Trusted(finished, round.r).empty();
  return round;
}

NextProbes KneeOrPeakProbes(const SearchSpace& space, const Outcomes& finished,
                            const RoundReading& round) {
  NextProbes next;
  next.points = round.by_knee
                    ? knee::Probes(space, finished, round.r, round.k, round.wide, &next.located)
                    : knee::PeakProbes(space, finished, round.r, round.k, &next.located);
  return next;
}

// The cost model's refinements stop at this many runs: on a plateau its
// optimum wanders inside the noise and each probe gains little.
bool WithinRefineBudget(const Outcomes& finished, size_t k) {
  return RunsMeasured(finished) < kRefineBudget + 2 * (k - 1);
}

// A bracket whose point past the knee has not fallen: the peak may lie
// up a plateau (ModelProbes), where the knee's bisection gains nothing.
// Scan first; bisect only when the fall is seen and the cost fit does not
// place the peak above the bracket.
void ScanBeforeBisecting(const SearchSpace& space, const Outcomes& finished,
                         const RoundReading& round, NextProbes& next) {
  const knee::Reading& r = round.r;
  const size_t k = round.k;
  if (next.points.empty() || !round.by_knee || !r.signal || !r.below ||
      r.past == std::numeric_limits<int64_t>::max() ||
      finished.at(r.past).kind != PointOutcome::Kind::kOk) {
    return;
  }
  std::vector<int64_t> scan;
  if (WithinRefineBudget(finished, k)) {
    scan = knee::ModelProbes(space, finished, r, k, /*scan_only=*/true);
  }
  if (!scan.empty()) {
    next.points = std::move(scan);
  } else if (auto up = knee::PlateauPeak(finished, r); up && *up > r.past) {
    next.points.clear();
    next.located =
        absl::StrCat("knee between ", *r.below, " and ", r.past, ", peak up the plateau at ", *up);
  } else if (auto anchor = knee::AnchorBelowKnee(space, r);
             k == 1 && anchor && knee::CheapPreemptions(finished, r)) {
    // Cheap preemptions: a plateau, whose peak the cost fit places from
    // the rise below the knee (its a / B) and the cost of the preemptions
    // past it. When the runs just below the knee read high, the fit sees
    // too little rise and places the peak inside the bracket, and the
    // bisection then packs its points where the plateau starts, below
    // 98.5% of the peak (LLaMa2-13B npuMemSize 24 MaxOutputLen 256, seed
    // 10: 136 for a peak at 146). One run at 0.9 x the knee gives the rise
    // a longer lever instead; the fit then decides, probing its optimum.
    // One node only: the rule compares throughput on both sides of the
    // knee, and on several nodes those runs may come from nodes of
    // different speeds. With nodes 0.9 to 1.1 apart (search-bench
    // --node-spread 0.2) a fast node's run far past a cliff looked cheap
    // beside a slow node's below it, and two nodes answered 87% of the
    // peak. The k-section and the confirming round's repeats of the rivals
    // meet the target on several nodes already.
    if (finished.begin()->first > *anchor) {
      next.points = {*anchor};
    } else {
      next.points.clear();
      next.located = absl::StrCat("knee between ", *r.below, " and ", r.past,
                                  ", preemptions cheap past it: the cost fit decides");
    }
  }
}

// Past the knee (the knee located), the cost model's probes, within the
// refinement budget.
void RefineByCostModel(const SearchSpace& space, const Outcomes& finished,
                       const RoundReading& round, NextProbes& next) {
  if (!next.points.empty() || !round.by_knee || !WithinRefineBudget(finished, round.k)) return;
  // The scan takes every free node (one round covers the plateau); a
  // node its probes leave free confirms the best so far (ProbeRound).
  next.points = knee::ModelProbes(space, finished, round.r, round.k);
  // Preemptions that cost nothing measurable: throughput decides, as
  // without the signal.
  if (auto m = knee::FitCost(finished, round.r); next.points.empty() && m && m->g <= 0) {
    std::string peaked;
    knee::Reading flat = round.r;
    flat.signal = false;
    next.points = knee::PeakProbes(space, finished, flat, round.k, &peaked);
    if (next.points.empty()) next.located = peaked;
  }
}

// A node the round leaves free confirms the best so far: on one node this
// never happens, on several it saves the confirming round.
SearchDecision ProbeRound(std::vector<int64_t> probes, size_t k,
                          const std::optional<SearchAnswer>& best) {
  SearchDecision d;
  d.wanted = std::move(probes);
  if (d.wanted.size() < k && best && best->runs < knee::kMaxDecidingRuns) {
    d.wanted.push_back(best->point);
    d.runs[best->point] = static_cast<uint32_t>(knee::kMaxDecidingRuns);
  }
  return d;
}

// Wants `point` at the runs that decide (once).
void Want(SearchDecision& d, int64_t point) {
  if (std::find(d.wanted.begin(), d.wanted.end(), point) != d.wanted.end()) return;
  d.wanted.push_back(point);
  d.runs[point] = static_cast<uint32_t>(knee::kMaxDecidingRuns);
}

// A second run of the answer, which also measures the noise band the
// report states; free nodes of that round repeat its rivals.
void WantConfirmingRound(const SearchSpace& space, const Outcomes& finished,
                         const RoundReading& round, const SearchAnswer& best, SearchDecision& d) {
  const size_t k = round.k;
  // With several nodes a confirming round has been spent once the repeats
  // (of the rounds' free nodes too) fill a round: the answer stands then,
  // even when those repeats moved it to a point measured once, which they
  // could not tell from the repeated ones beyond the band. Another
  // confirming round would cost a round and decide nothing the band sees.
  size_t repeats = 0;
  for (const auto& [point, o] : finished) repeats += o.runs > 1 ? o.runs - 1 : 0;
  // A wide round (knee_reading.h) measured the knee's window at once: on
  // the preemption signal its answer needs no round of repeats, which
  // would cost as much as the whole search so far.
  const bool confirmed = (k > 1 && repeats >= k) || (round.r.signal && round.wide);
  if (best.runs >= knee::kMaxDecidingRuns || confirmed) return;
  Want(d, best.point);
  // Free nodes of the confirming round repeat the answer's rivals, the
  // highest means measured once (a free node costs no round, so any of
  // them): when the repeats move the answer to one of them, it is
  // confirmed already, and the search ends without another round. One
  // node keeps its runs for the answer.
  for (int64_t p : knee::Rivals(space, finished, best.point, k > 1)) {
    if (d.wanted.size() >= k) break;
    Want(d, p);
  }
}

// The runs overrule the cost model, which saw every point: either the
// model misses a shape (a last wave that fills the batch only at some
// sizes) or the runs are an unlucky pair. A third run of each tells the
// two apart, when the budget has room. On one node only: with several,
// the confirming round has been the last (the rounds' budget).
void WantSettlingRuns(const SearchSpace& space, const Outcomes& finished, const RoundReading& round,
                      SearchDecision& d) {
  if (!d.wanted.empty() || round.k != 1) return;
  auto m = knee::FitCost(finished, round.r);
  if (!m || m->g <= 0) return;
  auto pick = ModelPick(space, finished, *m);
  if (!pick || pick->model == pick->measured) return;
  size_t more = 0;
  for (int64_t p : {pick->model, pick->measured}) {
    const size_t have = finished.at(p).samples.size();
    if (have < kSettlingRuns) more += kSettlingRuns - have;
  }
  if (more == 0 || RunsMeasured(finished) + more > kRunBudget) return;
  for (int64_t p : {pick->model, pick->measured}) {
    if (finished.at(p).samples.size() >= kSettlingRuns) continue;
    d.wanted.push_back(p);
    d.runs[p] = kSettlingRuns;
  }
}

// On throughput alone, the runner-up too when the band cannot tell it from
// the answer.
void WantRunnerUp(const SearchSpace& space, const Outcomes& finished, const RoundReading& round,
                  const SearchAnswer& best, SearchDecision& d) {
  if (round.r.signal) return;
  std::optional<int64_t> rival = knee::RunnerUp(space, finished, round.r, best.point);
  if (rival && finished.at(*rival).samples.size() < knee::kMaxDecidingRuns) Want(d, *rival);
}

}  // namespace

SearchDecision KneeSearch::Decide(const SearchSpace& space, const Outcomes& finished,
                                  size_t lookahead) const {
  if (RunsMeasured(finished) >= space.max_points) {
    return Ended(absl::StrCat("max_trials (", space.max_points, ") reached"));
  }
  const RoundReading round = ReadRound(space, finished, lookahead);
  NextProbes next = KneeOrPeakProbes(space, finished, round);
  ScanBeforeBisecting(space, finished, round, next);
  RefineByCostModel(space, finished, round, next);
  const std::optional<SearchAnswer> best = Best(space, finished);
  if (!next.points.empty()) return ProbeRound(std::move(next.points), round.k, best);
  // Located: confirm the answer with a second run, which also measures the
  // noise band the report states; on throughput alone, also the runner-up
  // when the band cannot tell the two apart.
  if (!best) return Ended(absl::StrCat(next.located, "; no point measured without a flag"));
  SearchDecision d;
  WantConfirmingRound(space, finished, round, *best, d);
  WantSettlingRuns(space, finished, round, d);
  WantRunnerUp(space, finished, round, *best, d);
  if (!d.wanted.empty()) return d;
  return Ended(absl::StrFormat("%s; best %d at %.4g token/s over %d runs", next.located,
                               best->point, best->objective, best->runs));
}

size_t KneeSearch::PlannedPoints(const SearchSpace& space) const {
  if (space.hi < space.lo) return 0;
  const auto width = static_cast<double>(space.hi - space.lo + 1);
  const auto res = static_cast<double>(knee::Resolution(space, space.initial));
  // Two to bracket, the halvings of a bracket of kSpread, one confirmation.
  const double halvings = std::ceil(std::log2(std::max(
      1.0,
      std::min(width, knee::kSpread * static_cast<double>(std::max<int64_t>(1, space.initial))) /
          res)));
  return std::min<size_t>(space.max_points, static_cast<size_t>(3 + halvings));
}

std::optional<SearchAnswer> KneeSearch::Best(const SearchSpace& space,
                                             const Outcomes& finished) const {
  const knee::Reading r = knee::Read(space, finished);
  const std::optional<knee::CostModel> model = knee::FitCost(finished, r);
  if (!r.signal || (model && model->g <= 0)) {
    knee::Reading flat = r;
    flat.signal = false;
    const auto usable = knee::Trusted(finished, flat);
    const int64_t cap = knee::Cap(finished);
    std::optional<int64_t> top;
    for (const auto& [point, o] : usable) {
      if (point < cap && (!top || o->objective > finished.at(*top).objective)) top = point;
    }
    if (!top) return SearchStrategy::Best(space, finished);
    return QualifiedAnswer(space, finished, *top);
  }
  if (model) {
    if (auto pick = ModelPick(space, finished, *model)) {
      return QualifiedAnswer(space, finished, pick->measured);
    }
  }
  const double noise = knee::DecisionNoise(space, finished);
  // Below the knee throughput rises with the batch, so among the points that
  // the noise cannot tell from the best, the largest is the best guess. On
  // throughput alone a point just past the knee may hide in the band too:
  // there the best mean wins.
  const std::pair<const int64_t, PointOutcome>* top = nullptr;
  for (const auto& entry : finished) {
    const auto& [point, o] = entry;
    if (o.kind != PointOutcome::Kind::kOk || o.untrusted || o.samples.empty()) continue;
    if (r.side.at(point) != knee::Side::kBelow || point > r.past) continue;
    if (top == nullptr || o.objective > top->second.objective) top = &entry;
  }
  if (top == nullptr) return SearchStrategy::Best(space, finished);
  int64_t chosen = top->first;
  for (const auto& [point, o] : finished) {
    if (!r.signal) break;
    if (point <= chosen || point > r.past || o.kind != PointOutcome::Kind::kOk || o.untrusted ||
        o.samples.empty() || r.side.at(point) != knee::Side::kBelow) {
      continue;
    }
    if (o.objective >=
        top->second.objective * (1 - NoiseBand(noise, knee::Runs(o), knee::Runs(top->second)))) {
      chosen = point;
    }
  }
  return QualifiedAnswer(space, finished, knee::MeasuredBetter(space, finished, chosen));
}

}  // namespace crest::controller
