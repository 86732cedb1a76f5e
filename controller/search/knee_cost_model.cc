#include "controller/search/knee_cost_model.h"

#include <algorithm>
#include <cmath>

namespace crest::controller::knee {
namespace {

// Sequences per preemption, at most, at the largest point before the cost
// fit may end the scan past the knee: with fewer preemptions their cost is
// lost in the noise of one run. At one preemption per two sequences, half
// the batch is recomputed once.
constexpr int64_t kPreemptionsSeen = 2;

// The fall per preemption per sequence, relative, below which preemptions
// are cheap. A plateau (a small cache per sequence, cheap to recompute)
// falls a few percent per preemption per sequence, a cliff tens of percent:
// the threshold sits far from both, so the run noise cannot move a search
// across it (decision 0024 has the curves, and the range of thresholds that
// give the same searches).
constexpr double kCheapFall = 0.12;

// Where the anchor below the knee goes, relative to the bracket's lower end.
constexpr double kAnchorBelow = 0.9;

// The width of the stretch of maxBatchSize that `point` stands for among the
// fitted points: half the distance to each neighbour, relative to the knee.
double CellWidth(const Outcomes& finished, int64_t below, int64_t point) {
  std::optional<int64_t> prev;
  std::optional<int64_t> next;
  for (const auto& [p, o] : finished) {
    if (o.kind != PointOutcome::Kind::kOk || !o.preemptions || o.untrusted || o.samples.empty() ||
        p * 10 < below * 7) {
      continue;
    }
    if (p < point) prev = p;
    if (p > point && !next) next = p;
  }
  const double left = prev ? static_cast<double>(point - *prev) : 0;
  const double right = next ? static_cast<double>(*next - point) : 0;
  const double w = (prev && next) ? (left + right) / 2 : std::max(left, right);
  return std::max(1.0, w);
}

}  // namespace

std::optional<CostModel> FitCost(const Outcomes& finished, const Reading& r) {
  if (!r.below) return std::nullopt;
  CostModel m;
  m.below = *r.below;
  double sxx[3][3] = {};
  double sxy[3] = {};
  int n = 0;
  bool past = false;
  bool scaled = false;
  for (const auto& [point, o] : finished) {
    if (o.kind != PointOutcome::Kind::kOk || !o.preemptions) continue;
    m.preemptions[point] = *o.preemptions;
    if (o.untrusted || o.samples.empty() || point * 10 < *r.below * 7) continue;
    if (!scaled) m.scale = o.objective;
    scaled = true;
    const double x[3] = {1000 / static_cast<double>(point), 1,
                         static_cast<double>(*o.preemptions) / 1000};
    const double y = m.scale / o.objective;
    // Each point stands for the stretch of maxBatchSize around it: the
    // knee's bisection packs its points within 1%, and weighted by runs
    // alone they would outvote the few points up a plateau, where the
    // optimum is.
    const double w = static_cast<double>(o.samples.size()) * CellWidth(finished, *r.below, point);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) sxx[i][j] += w * x[i] * x[j];
      sxy[i] += w * x[i] * y;
    }
    ++n;
    past |= *o.preemptions > 0;
  }
  if (n < 4 || !past) return std::nullopt;
  auto det3 = [](const double q[3][3]) {
    return q[0][0] * (q[1][1] * q[2][2] - q[1][2] * q[2][1]) -
           q[0][1] * (q[1][0] * q[2][2] - q[1][2] * q[2][0]) +
           q[0][2] * (q[1][0] * q[2][1] - q[1][1] * q[2][0]);
  };
  const double det = det3(sxx);
  if (std::abs(det) < 1e-12) return std::nullopt;
  double coef[3];
  for (int k = 0; k < 3; ++k) {  // Cramer's rule
    double q[3][3];
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) q[i][j] = j == k ? sxy[i] : sxx[i][j];
    }
    coef[k] = det3(q) / det;
  }
  m.a = coef[0];
  m.c = coef[1];
  m.g = coef[2];
  if (m.a <= 0) return std::nullopt;  // not the shape the model assumes
  return m;
}

std::optional<int64_t> ModelOptimum(const CostModel& m, const Reading& r) {
  std::optional<int64_t> best;
  double best_speed = 0;
  for (int64_t b = *r.below; b <= m.preemptions.rbegin()->first; ++b) {
    auto v = m.Speed(b);
    if (v && *v > best_speed) {
      best_speed = *v;
      best = b;
    }
  }
  return best;
}

std::optional<int64_t> PlateauPeak(const Outcomes& finished, const Reading& r) {
  auto m = FitCost(finished, r);
  if (!m || m->g <= 0) return std::nullopt;
  return ModelOptimum(*m, r);
}

bool CheapPreemptions(const Outcomes& finished, const Reading& r) {
  if (!r.below) return false;
  double below = 0;  // the best mean below the knee
  for (const auto& [point, o] : Trusted(finished, r)) below = std::max(below, o->objective);
  if (below <= 0) return false;
  const int64_t cap = Cap(finished);
  // The highest point above the bracket's past point: the longest lever on
  // the cost of a preemption.
  const auto top = std::find_if(finished.rbegin(), finished.rend(), [&](const auto& entry) {
    return entry.first > r.past && TrustedBelow(entry.first, entry.second, cap) &&
           entry.second.preemptions.value_or(0) > 0;
  });
  if (top == finished.rend()) return false;
  const double per_sequence =
      static_cast<double>(*top->second.preemptions) / static_cast<double>(top->first);
  return 1 - top->second.objective / below < kCheapFall * per_sequence;
}

std::optional<int64_t> AnchorBelowKnee(const SearchSpace& space, const Reading& r) {
  if (!r.below) return std::nullopt;
  const int64_t anchor =
      std::max<int64_t>(space.lo, std::llround(kAnchorBelow * static_cast<double>(*r.below)));
  if (anchor >= *r.below) return std::nullopt;
  return anchor;
}

std::vector<int64_t> StepsUp(const SearchSpace& space, const Outcomes& finished, int64_t last,
                             size_t n) {
  const int64_t top = std::min(space.hi, Cap(finished) - 1);
  const int64_t d = std::max<int64_t>(1, std::llround(kSpread * static_cast<double>(last)));
  std::vector<int64_t> out;
  for (int64_t p = last + d; p <= top && out.size() < n; p += d) {
    if (finished.count(p) == 0) out.push_back(p);
  }
  return out;
}

std::vector<int64_t> ModelProbes(const SearchSpace& space, const Outcomes& finished,
                                 const Reading& r, size_t n, bool scan_only) {
  // The fit must see the fall itself, not only its start: a few preemptions
  // are lost in the throughput noise, and with a small cache per sequence
  // (LLaMa2-13B, MaxOutputLen 256: knee at 95, peak at 109 with 1.1
  // preemptions per sequence, 2.5% above the knee) throughput stays on a
  // plateau long past the knee. So while the largest point measured has not
  // fallen beyond the noise band below the best mean, step up by kSpread
  // (n points at once with n free nodes: one round scans the plateau). The
  // preemption count alone cannot end the scan: how much a preemption costs
  // is what the fit is to find out.
  // The scan also ends once the fit places its optimum below the largest
  // point: it has seen throughput turn, which one run's noise cannot show
  // beyond the band (4.5% lower at 112 on that plateau, inside 5.7%).
  auto m = FitCost(finished, r);
  std::optional<int64_t> best;
  if (m) best = ModelOptimum(*m, r);
  const bool turned = m && m->g > 0 && best && *best < m->preemptions.rbegin()->first;
  const std::optional<int64_t> best_at = BestPoint(finished);
  const double best_mean = best_at ? finished.at(*best_at).objective : 0;
  const double noise = DecisionNoise(space, finished);
  const int64_t cap = Cap(finished);
  auto fallen = [&](int64_t point, const PointOutcome& o) {
    return TrustedBelow(point, o, cap) &&
           o.objective < best_mean * (1 - NoiseBand(noise, Runs(o), 1));
  };
  // Throughput past its peak only falls, so a point past the knee and above
  // the best mean's that has fallen beyond the band ends the scan, whatever
  // the points above it read within the band of it. On k nodes a scan round
  // measures k points; were the largest alone to decide, one high reading at
  // a round's top would carry the scan a round further, past the budget of
  // rounds (decision 0015). A higher point that reads above the fall beyond
  // the band contradicts it (nodes that differ, a busy neighbour): then the
  // largest point decides.
  bool fell = false;
  for (auto x = finished.begin(); best_at && !fell && x != finished.end(); ++x) {
    const PointOutcome& fall = x->second;
    if (x->first <= *best_at || fall.preemptions.value_or(0) == 0 || !fallen(x->first, fall)) {
      continue;
    }
    fell = std::none_of(std::next(x), finished.end(), [&](const auto& y) {
      return TrustedBelow(y.first, y.second, cap) &&
             y.second.objective >
                 fall.objective * (1 + NoiseBand(noise, Runs(y.second), Runs(fall)));
    });
  }
  for (auto it = finished.rbegin(); !fell && it != finished.rend(); ++it) {
    const auto& [last, o] = *it;
    if (o.kind != PointOutcome::Kind::kOk || !o.preemptions || last >= cap) continue;
    if (fallen(last, o) || (turned && *o.preemptions * kPreemptionsSeen >= last)) break;
    if (auto up = StepsUp(space, finished, last, n); !up.empty()) return up;
    break;
  }
  if (scan_only) return {};
  if (!m || m->g <= 0 || !best) return {};
  const int64_t last = m->preemptions.rbegin()->first;
  // Still rising at the largest point measured: look further up.
  if (*best == last) return StepsUp(space, finished, last, n);
  const int64_t res = Resolution(space, *best);
  for (const auto& [point, o] : finished) {
    if (std::abs(point - *best) <= res) return {};
  }
  return {*best};
}

}  // namespace crest::controller::knee
