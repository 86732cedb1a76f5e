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
// On throughput alone, where repeats of a flat top could go on: the runs of
// the confirmation included, at most (on one node).
constexpr size_t kRunCeiling = 12;
// Runs the model check's repeats leave for the rest of the search.
constexpr size_t kSettleReserve = 3;

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
  size_t k = 1;                 // runs the round may propose
  std::optional<double> wide;   // knee::WideSpacing
  knee::Reading r;              // on throughput alone once the model broke
  bool by_knee = false;         // the probes follow the knee, not throughput's peak
  knee::ModelCheck check;       // knee::CheckKneeModel
  bool far = false;             // knee::FarAboveGuess, read with the counter
  std::vector<int64_t> checks;  // knee::CheckPoints
  const std::optional<std::string>& broken() const { return check.broken; }
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
  // What the knee model cannot explain: from then on the search brackets
  // throughput's peak alone, around the best mean.
  round.check = knee::CheckKneeModel(space, finished, round.r);
  round.far = knee::FarAboveGuess(space, round.r);
  if (round.broken()) round.r = knee::Read(space, finished, /*use_counter=*/false);
  round.checks = knee::CheckPoints(space, round.r);
  // Until a point measures ok, only infeasible points are known: they are
  // past the knee either way.
  round.by_knee = round.r.signal || knee::Trusted(finished, round.r).empty();
  return round;
}

// One node's run budget: kRunBudget, or kRunCeiling when the knee lies far
// above the guess, where the model's checks want a point more
// (knee::CheckPoints) and the bracket to narrow is wider.
size_t RunBudget(const RoundReading& round) { return round.far ? kRunCeiling : kRunBudget; }

// Runs the model check's repeats leave for the rest of the search: one
// fewer when the knee lies far above the guess, whose second check point
// took one (knee::CheckPoints).
size_t SettleReserve(const RoundReading& round) {
  return round.far ? kSettleReserve - 1 : kSettleReserve;
}

// The first check point (knee::CheckPoints) not measured yet.
std::optional<int64_t> NextCheckPoint(const Outcomes& finished, const RoundReading& round) {
  for (int64_t p : round.checks) {
    if (finished.count(p) == 0) return p;
  }
  return std::nullopt;
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

// The knee model's check against the rest of the range (knee::CheckPoint),
// once the knee is bracketed and before the bracket is narrowed: were the
// peak below the knee, narrowing it would be spent in vain. On one node it
// takes the round; on several it rides in a free place. Only while the run
// budget leaves room for the answer's confirmation.
void WantModelCheck(const Outcomes& finished, const RoundReading& round, NextProbes& next) {
  if (!round.by_knee || round.broken() || !round.r.signal) return;
  const std::optional<int64_t> at = NextCheckPoint(finished, round);
  if (!at) return;
  if (std::find(next.points.begin(), next.points.end(), *at) != next.points.end()) return;
  if (RunsMeasured(finished) + 2 > RunBudget(round)) return;
  // One node: once the knee is bracketed (a point past it) or located, or
  // as soon as it is known far above the guess (the guess's arithmetic is
  // wrong, and the stretch below is checked before more runs go up).
  const bool bracketed = round.r.past != std::numeric_limits<int64_t>::max();
  if (round.k == 1 && (bracketed || round.far || next.points.empty())) {
    next.points = {*at};
  } else if (round.k > 1 && !next.points.empty() && next.points.size() < round.k) {
    next.points.push_back(*at);
  }
}

// Runs of the points whose repeats decide whether the model holds.
// On one node only, and only while the budget keeps kSettleReserve runs for
// the knee's bisection and the answer's confirmation: on several nodes a
// round of repeats costs as much as the knee's own rounds.
std::optional<SearchDecision> SettleModelCheck(const Outcomes& finished,
                                               const RoundReading& round) {
  if (round.broken() || round.check.settle.empty() || round.k != 1) return std::nullopt;
  // Every check point is measured first: the settling runs go to the one
  // that reads highest.
  if ((round.r.past != std::numeric_limits<int64_t>::max() || round.far) &&
      RunsMeasured(finished) + 2 <= RunBudget(round) && NextCheckPoint(finished, round)) {
    return std::nullopt;
  }
  SearchDecision d;
  size_t more = 0;
  for (int64_t p : round.check.settle) {
    const size_t have = finished.at(p).samples.size();
    if (have >= knee::kMaxDecidingRuns) continue;
    more += knee::kMaxDecidingRuns - have;
    d.wanted.push_back(p);
    d.runs[p] = static_cast<uint32_t>(knee::kMaxDecidingRuns);
  }
  if (d.wanted.empty() || RunsMeasured(finished) + more + SettleReserve(round) > RunBudget(round)) {
    return std::nullopt;
  }
  return d;
}

// On throughput alone the search stops probing once the run budget is
// spent, with room left for the answer's confirmation: on a flat top the
// noise would keep moving the best. The confirmation ends at kRunCeiling.
// When the knee lies far above the guess, the model's second check point
// and its settling runs came out of kRunCeiling (RunBudget): the bracket
// around the best mean gets all but the confirming run.
size_t MeasuredBudget(const RoundReading& round) {
  return round.far ? kRunCeiling - 1 : kRunBudget;
}
bool MeasuredBudgetSpent(const Outcomes& finished, const RoundReading& round) {
  return !round.by_knee && RunsMeasured(finished) >= MeasuredBudget(round);
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
  if (!d.wanted.empty() || round.k != 1 || round.broken()) return;
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
  // One node's run budget holds once the model check's run was paid from it.
  const size_t budget = RunBudget(round);
  if (round.by_knee && round.k == 1 && !round.checks.empty() &&
      finished.count(round.checks.front()) != 0 && RunsMeasured(finished) >= budget) {
    const std::optional<SearchAnswer> best = Best(space, finished);
    return Ended(absl::StrCat("the run budget (", budget, ") is spent",
                              best ? absl::StrFormat("; best %d at %.4g token/s over %d runs",
                                                     best->point, best->objective, best->runs)
                                   : ""));
  }
  if (!round.by_knee && round.k == 1 && RunsMeasured(finished) >= kRunCeiling) {
    const std::optional<SearchAnswer> best = Best(space, finished);
    return Ended(absl::StrCat(
        "on throughput alone, ", kRunCeiling, " runs measured",
        round.broken() ? absl::StrCat(" (the knee model does not hold: ", *round.broken(), ")")
                       : "",
        best ? absl::StrFormat("; best %d at %.4g token/s over %d runs", best->point,
                               best->objective, best->runs)
             : ""));
  }
  NextProbes next = KneeOrPeakProbes(space, finished, round);
  if (auto settle = SettleModelCheck(finished, round)) return *settle;
  ScanBeforeBisecting(space, finished, round, next);
  RefineByCostModel(space, finished, round, next);
  WantModelCheck(finished, round, next);
  if (MeasuredBudgetSpent(finished, round) && !next.points.empty()) {
    next.points.clear();
    next.located =
        absl::StrCat("the run budget (", MeasuredBudget(round), ") is spent on throughput alone");
  }
  const std::optional<SearchAnswer> best = Best(space, finished);
  if (!next.points.empty()) return ProbeRound(std::move(next.points), round.k, best);
  if (round.broken()) {
    next.located =
        absl::StrCat(next.located, " (the knee model does not hold: ", *round.broken(), ")");
  }
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

namespace {

// `answer` with its basis and the reason the report prints.
std::optional<SearchAnswer> WithBasis(std::optional<SearchAnswer> answer, const char* basis,
                                      std::string reason) {
  if (answer) {
    answer->basis = basis;
    answer->basis_reason = std::move(reason);
  }
  return answer;
}

// Where the knee lies, for the reasons.
std::string KneeBracket(const knee::Reading& r) {
  if (!r.below) return absl::StrCat("below ", r.past);
  if (r.past == std::numeric_limits<int64_t>::max()) return absl::StrCat("above ", *r.below);
  return absl::StrCat("between ", *r.below, " and ", r.past);
}

// Measured points on each side of the best mean whose neighbourhood the
// smoothing reads.
constexpr size_t kSmoothingSide = 2;

// Among the best mean and its level neighbours (kSmoothingSide each side), the
// point a quadratic in maxBatchSize, fitted by least squares weighted by
// runs, ranks first: the best single mean is the luckiest run as often as
// the best point (on a flat top almost always), and the neighbours' runs
// average that luck out. With fewer than four points, the best mean; but
// when those few level points hold the range's top (`at_top`) and a point
// below them is clearly lower, throughput is still rising into the top of
// the range and the noise cannot rank the level points: the largest.
int64_t SmoothedTop(const std::vector<std::pair<int64_t, const PointOutcome*>>& usable, size_t m,
                    double noise, bool at_top) {
  // Only neighbours level with the best within the band: one past a cliff
  // would bend the fit away from the cliff's edge.
  auto level = [&](size_t i) {
    return !knee::MeasuresUnder(noise, *usable[i].second, *usable[m].second);
  };
  size_t from = m, to = m + 1;
  while (from > 0 && m - (from - 1) <= kSmoothingSide && level(from - 1)) --from;
  while (to < usable.size() && to - m <= kSmoothingSide && level(to)) ++to;
  if (to - from < 4) {
    return at_top && to == usable.size() && from > 0 ? usable[to - 1].first : usable[m].first;
  }
  // Normal equations of y = c0 + c1 x + c2 x^2, x centred and scaled.
  const auto x0 = static_cast<double>(usable[m].first);
  const double sx = std::max(1.0, static_cast<double>(usable[to - 1].first - usable[from].first));
  double s[5] = {0, 0, 0, 0, 0}, t[3] = {0, 0, 0};
  for (size_t i = from; i < to; ++i) {
    const double x = (static_cast<double>(usable[i].first) - x0) / sx;
    const auto w = static_cast<double>(knee::Runs(*usable[i].second));
    double p = w;
    for (double& v : s) {
      v += p;
      p *= x;
    }
    const double y = usable[i].second->objective;
    t[0] += w * y;
    t[1] += w * y * x;
    t[2] += w * y * x * x;
  }
  const double a[3][3] = {{s[0], s[1], s[2]}, {s[1], s[2], s[3]}, {s[2], s[3], s[4]}};
  auto det3 = [](const double q[3][3]) {
    return q[0][0] * (q[1][1] * q[2][2] - q[1][2] * q[2][1]) -
           q[0][1] * (q[1][0] * q[2][2] - q[1][2] * q[2][0]) +
           q[0][2] * (q[1][0] * q[2][1] - q[1][1] * q[2][0]);
  };
  const double d = det3(a);
  if (std::abs(d) < 1e-12) return usable[m].first;
  double c[3];
  for (int k = 0; k < 3; ++k) {
    double q[3][3];
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) q[i][j] = j == k ? t[i] : a[i][j];
    }
    c[k] = det3(q) / d;
  }
  // A fit that is not concave has no top: it ranks an end of the window
  // first, and the ends are the points the neighbours least support.
  if (c[2] >= 0) return usable[m].first;
  size_t top = m;
  double top_fit = -std::numeric_limits<double>::infinity();
  for (size_t i = from; i < to; ++i) {
    const double x = (static_cast<double>(usable[i].first) - x0) / sx;
    const double fit = c[0] + c[1] * x + c[2] * x * x;
    if (fit > top_fit) {
      top_fit = fit;
      top = i;
    }
  }
  return usable[top].first;
}

// Throughput alone: the best trusted mean below the cap, smoothed over its
// neighbours (SmoothedTop).
std::optional<SearchAnswer> BestMeasured(const SearchSpace& space, const Outcomes& finished,
                                         const knee::Reading& r, std::string reason) {
  knee::Reading flat = r;
  flat.signal = false;
  const int64_t cap = knee::Cap(finished);
  std::vector<std::pair<int64_t, const PointOutcome*>> usable;
  for (const auto& entry : knee::Trusted(finished, flat)) {
    if (entry.first < cap) usable.push_back(entry);
  }
  if (usable.empty()) return std::nullopt;
  size_t m = 0;
  for (size_t i = 1; i < usable.size(); ++i) {
    if (usable[i].second->objective > usable[m].second->objective) m = i;
  }
  const bool at_top = usable.back().first >= std::min(space.hi, cap - 1);
  return WithBasis(
      QualifiedAnswer(space, finished,
                      SmoothedTop(usable, m, knee::DecisionNoise(space, finished), at_top)),
      "measured", std::move(reason));
}

}  // namespace

std::optional<SearchAnswer> KneeSearch::Best(const SearchSpace& space,
                                             const Outcomes& finished) const {
  const knee::Reading r = knee::Read(space, finished);
  const knee::ModelCheck check = knee::CheckKneeModel(space, finished, r);
  // The model broken, or a far knee's check it could not settle: the
  // answer rests on the measurements.
  std::string on_measurements;
  if (check.broken) {
    on_measurements = absl::StrCat("the knee model does not hold (", *check.broken,
                                   "): the best mean throughput");
  } else if (check.doubted && knee::FarAboveGuess(space, r)) {
    on_measurements =
        "the knee lies far above the guess and a check point reads as high as the knee, "
        "unsettled: the best mean throughput";
  }
  if (!on_measurements.empty()) {
    auto best = BestMeasured(space, finished, knee::Read(space, finished, /*use_counter=*/false),
                             std::move(on_measurements));
    if (best) return best;
    if (check.broken) return SearchStrategy::Best(space, finished);
  }
  const std::optional<knee::CostModel> model = knee::FitCost(finished, r);
  if (!r.signal || (model && model->g <= 0)) {
    auto best = BestMeasured(
        space, finished, r,
        !r.signal ? "the daemon publishes no preemption counter: the best mean throughput"
                  : absl::StrCat("preemptions past the knee (", KneeBracket(r),
                                 ") cost nothing measurable: the best mean throughput"));
    if (best) return best;
    return SearchStrategy::Best(space, finished);
  }
  const std::string overruled =
      "a measured point beat the knee model's choice beyond the noise band";
  if (model) {
    if (auto pick = ModelPick(space, finished, *model)) {
      if (pick->measured != pick->model) {
        return WithBasis(QualifiedAnswer(space, finished, pick->measured), "measured",
                         absl::StrCat(overruled, " (the model's: ", pick->model, ")"));
      }
      return WithBasis(
          QualifiedAnswer(space, finished, pick->model), "knee-fit",
          absl::StrCat("the cost model fitted to the runs around the knee (", KneeBracket(r),
                       ") ranks it first", knee::FarFromGuess(space, r)));
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
    if (!knee::MeasuresUnder(noise, o, top->second)) chosen = point;
  }
  const int64_t answer = knee::MeasuredBetter(space, finished, chosen);
  if (answer != chosen) {
    return WithBasis(QualifiedAnswer(space, finished, answer), "measured",
                     absl::StrCat(overruled, " (the knee rule's: ", chosen, ")"));
  }
  return WithBasis(
      QualifiedAnswer(space, finished, answer), "knee",
      absl::StrCat("the largest point below the knee (", KneeBracket(r),
                   ") within the noise band of the best", knee::FarFromGuess(space, r)));
}

}  // namespace crest::controller
