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

#include "controller/search.h"

namespace crest::controller {
namespace {

// Spacing of the first points around the predicted knee, relative.
constexpr double kSpread = 0.04;
// Sequences per preemption, at most, at the largest point before the cost
// fit may end the scan past the knee: with fewer preemptions their cost is
// lost in the noise of one run. At one preemption per two sequences, half
// the batch is recomputed once.
constexpr int64_t kPreemptionsSeen = 2;
// Runs after which the cost model's probes stop (the answer's confirmation
// follows) on one node, the budget being 10; two more per extra node,
// whose rounds measure several points at once.
constexpr size_t kRefineBudget = 8;
// Runs at most of each of two points the noise cannot tell apart.
constexpr size_t kMaxDecidingRuns = 2;

enum class Side { kBelow, kPast };

struct Reading {
  std::map<int64_t, Side> side;                        // every measured point's side of the knee
  bool signal = false;                                 // the daemon publishes preemptions
  int64_t past = std::numeric_limits<int64_t>::max();  // smallest point past the knee
  std::optional<int64_t> below;                        // largest point below it
  std::string past_why;
};

double Mean(const PointOutcome& o) { return o.objective; }

// The noise a decision assumes: the measured one shrunk toward the prior
// with the weight of two runs, so that two close samples by chance do not
// make every small difference a fall.
double DecisionNoise(const SearchSpace& space, const Outcomes& finished) {
  constexpr double kPriorWeight = 2;
  double sum_sq = 0;
  size_t dof = 0;
  for (const auto& [point, o] : finished) {
    if (o.kind != PointOutcome::Kind::kOk || o.untrusted || o.samples.size() < 2) continue;
    double mean = 0;
    for (double v : o.samples) mean += v;
    mean /= static_cast<double>(o.samples.size());
    for (double v : o.samples) sum_sq += (v / mean - 1) * (v / mean - 1);
    dof += o.samples.size() - 1;
  }
  return std::sqrt((sum_sq + kPriorWeight * space.noise_prior * space.noise_prior) /
                   (static_cast<double>(dof) + kPriorWeight));
}

size_t Runs(const PointOutcome& o) { return std::max<size_t>(1, o.samples.size()); }

Reading Read(const SearchSpace& space, const Outcomes& finished) {
  Reading r;
  for (const auto& [point, o] : finished) {
    r.signal |= o.kind == PointOutcome::Kind::kOk && o.preemptions.has_value();
  }
  const double noise = DecisionNoise(space, finished);
  // The best trusted point seen so far, ascending: a drop is judged against it.
  const PointOutcome* best_below = nullptr;
  for (const auto& [point, o] : finished) {
    Side side = Side::kBelow;
    if (o.kind != PointOutcome::Kind::kOk) {
      side = Side::kPast;  // infeasible or failed: caps the range
    } else if (r.signal && o.preemptions.has_value()) {
      side = *o.preemptions > 0 ? Side::kPast : Side::kBelow;
    } else if (!o.untrusted && best_below != nullptr) {
      const double band = NoiseBand(noise, Runs(o), Runs(*best_below));
      const double drop = 1 - Mean(o) / Mean(*best_below);
      if (drop > band) side = Side::kPast;
    }
    r.side[point] = side;
    if (side == Side::kBelow && !o.untrusted && !o.samples.empty() &&
        (best_below == nullptr || Mean(o) > Mean(*best_below))) {
      best_below = &o;
    }
  }
  for (const auto& [point, side] : r.side) {
    if (side == Side::kPast) {
      r.past = point;
      const PointOutcome& o = finished.at(point);
      if (o.kind != PointOutcome::Kind::kOk) {
        r.past_why =
            absl::StrCat(o.kind == PointOutcome::Kind::kInfeasible ? "infeasible" : "failed",
                         o.reason.empty() ? "" : ": " + o.reason);
      } else if (o.preemptions.has_value() && r.signal) {
        r.past_why = absl::StrCat(*o.preemptions, " preemptions");
      } else {
        r.past_why = "throughput fell beyond the noise band";
      }
      break;
    }
  }
  for (const auto& [point, side] : r.side) {
    if (side == Side::kBelow && point < r.past) r.below = point;
  }
  return r;
}

int64_t Resolution(const SearchSpace& space, int64_t at) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::floor(space.resolution * at)));
}

// The next points to measure while the knee is not bracketed to the
// resolution; empty when it is (or the range is exhausted).
std::vector<int64_t> Probes(const SearchSpace& space, const Outcomes& finished, const Reading& r,
                            size_t k, std::string* why_done) {
  const int64_t hi = std::min(space.hi, r.past - 1);
  std::vector<double> raw;
  if (!r.below && r.past == std::numeric_limits<int64_t>::max()) {
    // Nothing known: k points around the predicted knee.
    const auto c = static_cast<double>(
        std::clamp(space.knee_guess > 0 ? space.knee_guess : space.initial, space.lo, space.hi));
    for (size_t i = 0; i < k; ++i) {
      raw.push_back(c *
                    (1 + kSpread * (static_cast<double>(i) - (static_cast<double>(k) - 1) / 2)));
    }
  } else if (!r.below) {
    // Past the knee everywhere measured: step down, doubling.
    if (r.past <= space.lo) {
      *why_done = absl::StrCat("maxBatchSize ", r.past, " (the range's low end) is past the knee (",
                               r.past_why, ")");
      return {};
    }
    int64_t far = r.past;
    for (const auto& [point, side] : r.side) far = std::max(far, point);
    const double step = std::max(kSpread * static_cast<double>(r.past),
                                 static_cast<double>(far - r.past) / static_cast<double>(k));
    for (size_t i = 1; i <= k; ++i) raw.push_back(static_cast<double>(r.past) - step * i);
  } else if (r.past == std::numeric_limits<int64_t>::max() || *r.below >= hi) {
    if (*r.below >= hi) {
      *why_done =
          r.past == std::numeric_limits<int64_t>::max()
              ? absl::StrCat("no knee up to the range's end (", space.hi, ")")
              : absl::StrCat("knee between ", *r.below, " and ", r.past, " (", r.past_why, ")");
      return {};
    }
    // Below the knee everywhere measured: step up, doubling.
    int64_t near = *r.below;
    for (const auto& [point, side] : r.side) near = std::min(near, point);
    // k points share the doubling: the round reaches as far as one point
    // would on one node, but k-sections it, so the next round's bracket is
    // k times narrower (at most kSpread wide).
    const double step = std::max(kSpread * static_cast<double>(*r.below),
                                 static_cast<double>(*r.below - near) / static_cast<double>(k));
    for (size_t i = 1; i <= k; ++i) raw.push_back(static_cast<double>(*r.below) + step * i);
  } else {
    const int64_t gap = r.past - *r.below;
    if (gap <= Resolution(space, *r.below)) {
      *why_done = absl::StrCat("knee between ", *r.below, " and ", r.past, " (", r.past_why, ")");
      return {};
    }
    for (size_t i = 1; i <= k; ++i) {
      raw.push_back(static_cast<double>(*r.below) +
                    static_cast<double>(gap) * static_cast<double>(i) / static_cast<double>(k + 1));
    }
  }
  std::vector<int64_t> out;
  for (double x : raw) {
    auto p = std::clamp<int64_t>(std::llround(x), space.lo, hi);
    if (r.below) p = std::max(p, *r.below + 1);
    if (p > hi || finished.count(p) != 0 || std::find(out.begin(), out.end(), p) != out.end()) {
      continue;
    }
    out.push_back(p);
  }
  if (out.empty()) {
    *why_done = r.below ? absl::StrCat("every point next to ", *r.below, " measured")
                        : "no point left to measure";
  }
  return out;
}

// Trusted ok points below the cap (infeasible / failed points), by point.
std::vector<std::pair<int64_t, const PointOutcome*>> Trusted(const Outcomes& finished,
                                                             const Reading& r) {
  std::vector<std::pair<int64_t, const PointOutcome*>> out;
  for (const auto& [point, o] : finished) {
    if (o.kind == PointOutcome::Kind::kOk && !o.untrusted && !o.samples.empty() &&
        (point < r.past || !r.signal)) {
      out.emplace_back(point, &o);
    }
  }
  return out;
}

// The cap from above: the smallest infeasible or failed point.
int64_t Cap(const Outcomes& finished) {
  int64_t cap = std::numeric_limits<int64_t>::max();
  for (const auto& [point, o] : finished) {
    if (o.kind != PointOutcome::Kind::kOk) cap = std::min(cap, point);
  }
  return cap;
}

// Throughput alone: the peak lies between the neighbours of the best mean
// (unimodality). Step out from the best while it has no neighbour on a
// side, doubling; then split the wider side until both neighbours lie
// within the resolution.
std::vector<int64_t> PeakProbes(const SearchSpace& space, const Outcomes& finished,
                                const Reading& r, size_t k, std::string* why_done) {
  const int64_t cap = Cap(finished);
  const int64_t hi = std::min(space.hi, cap - 1);
  auto usable = Trusted(finished, r);
  std::vector<double> raw;
  if (usable.empty()) {
    if (hi < space.lo) {
      *why_done = "every point up to the range's low end is infeasible";
      return {};
    }
    const auto c = static_cast<double>(
        std::clamp(space.knee_guess > 0 ? space.knee_guess : space.initial, space.lo, hi));
    for (size_t i = 0; i < k; ++i) {
      raw.push_back(c *
                    (1 + kSpread * (static_cast<double>(i) - (static_cast<double>(k) - 1) / 2)));
    }
  } else {
    size_t m = 0;
    for (size_t i = 1; i < usable.size(); ++i) {
      if (usable[i].second->objective > usable[m].second->objective) m = i;
    }
    const int64_t at = usable[m].first;
    const std::optional<int64_t> left =
        m > 0 ? std::optional<int64_t>(usable[m - 1].first) : std::nullopt;
    const std::optional<int64_t> right =
        m + 1 < usable.size() ? std::optional<int64_t>(usable[m + 1].first) : std::nullopt;
    const int64_t res = Resolution(space, at);
    const double spread = std::max(kSpread * static_cast<double>(at), 1.0);
    const bool open_left = !left && at > space.lo;
    const bool open_right = !right && at < hi && cap - at > res;
    if (open_left || open_right) {
      // Step out on the open sides, doubling the distance to the far side.
      const auto far_left = static_cast<double>(usable.front().first);
      const auto far_right = static_cast<double>(usable.back().first);
      const double up = std::max(spread, static_cast<double>(at) - far_left);
      const double down = std::max(spread, far_right - static_cast<double>(at));
      for (size_t i = 1; raw.size() < k && i <= k; ++i) {
        if (open_right) raw.push_back(static_cast<double>(at) + up * i);
        if (open_left && raw.size() < k) raw.push_back(static_cast<double>(at) - down * i);
      }
    } else {
      const int64_t lo_n = left.value_or(at);
      const int64_t hi_n = right.value_or(std::min(hi + 1, cap));
      if (hi_n - lo_n <= 2 * res) {
        *why_done = absl::StrCat("throughput peaks at ", at, " between ", lo_n, " and ", hi_n);
        return {};
      }
      // k points over the two sides of the best, by their widths; one
      // point goes to the wider side.
      const auto wl = static_cast<double>(at - lo_n);
      const auto wr = static_cast<double>(hi_n - at);
      auto n_left = static_cast<size_t>(std::llround(static_cast<double>(k) * wl / (wl + wr)));
      if (k == 1) n_left = wl > wr ? 1 : 0;
      if (k > 1 && wl > 1 && n_left == 0) n_left = 1;
      if (k > 1 && wr > 1 && n_left == k) n_left = k - 1;
      const size_t n_right = k - n_left;
      for (size_t i = 1; i <= n_left; ++i) {
        raw.push_back(static_cast<double>(lo_n) +
                      wl * static_cast<double>(i) / static_cast<double>(n_left + 1));
      }
      for (size_t i = 1; i <= n_right; ++i) {
        raw.push_back(static_cast<double>(at) +
                      wr * static_cast<double>(i) / static_cast<double>(n_right + 1));
      }
    }
  }
  std::vector<int64_t> out;
  for (double x : raw) {
    const auto p = std::clamp<int64_t>(std::llround(x), space.lo, hi);
    if (finished.count(p) != 0 || std::find(out.begin(), out.end(), p) != out.end()) continue;
    out.push_back(p);
  }
  if (out.empty()) *why_done = "every point around the best measured";
  return out;
}

// On throughput alone: the best other point the noise band cannot tell
// from `best`, if any.
std::optional<int64_t> RunnerUp(const SearchSpace& space, const Outcomes& finished,
                                const Reading& r, int64_t best) {
  const double noise = DecisionNoise(space, finished);
  const PointOutcome& b = finished.at(best);
  std::optional<int64_t> rival;
  for (const auto& [point, o] : Trusted(finished, r)) {
    if (point == best) continue;
    if (o->objective < b.objective * (1 - NoiseBand(noise, Runs(*o), Runs(b)))) continue;
    if (!rival || o->objective > finished.at(*rival).objective) rival = point;
  }
  return rival;
}

// The points measured once (trusted, below the cap) whose mean the noise
// band cannot tell from `answer`'s, or with `any` every such point, the
// highest mean first.
std::vector<int64_t> Rivals(const SearchSpace& space, const Outcomes& finished, int64_t answer,
                            bool any) {
  const double noise = DecisionNoise(space, finished);
  const PointOutcome& a = finished.at(answer);
  const int64_t cap = Cap(finished);
  std::vector<std::pair<double, int64_t>> rivals;
  for (const auto& [point, o] : finished) {
    if (point == answer || point >= cap || o.kind != PointOutcome::Kind::kOk || o.untrusted ||
        o.samples.empty() || o.samples.size() >= kMaxDecidingRuns) {
      continue;
    }
    if (any || o.objective >= a.objective * (1 - NoiseBand(noise, Runs(o), Runs(a)))) {
      rivals.emplace_back(-o.objective, point);
    }
  }
  std::sort(rivals.begin(), rivals.end());
  std::vector<int64_t> out;
  out.reserve(rivals.size());
  for (const auto& [neg, point] : rivals) out.push_back(point);
  return out;
}

// Measurements overrule the model and the knee rule: the point whose mean
// beats `chosen`'s by more than the noise band, the best such, is the
// answer. The model cannot see everything a run measures (a benchmark of
// few requests per client, whose last wave fills the batch only at some
// sizes, is the e2e test's case: +6% between two neighbours).
int64_t MeasuredBetter(const SearchSpace& space, const Outcomes& finished, int64_t chosen) {
  const double noise = DecisionNoise(space, finished);
  const PointOutcome& c = finished.at(chosen);
  const int64_t cap = Cap(finished);
  int64_t best = chosen;
  for (const auto& [point, o] : finished) {
    if (o.kind != PointOutcome::Kind::kOk || o.untrusted || o.samples.empty() || point >= cap) {
      continue;
    }
    if (o.objective * (1 - NoiseBand(noise, Runs(o), Runs(c))) > c.objective &&
        o.objective > finished.at(best).objective) {
      best = point;
    }
  }
  return best;
}

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

// The mean of the best trusted ok point below the cap, whatever its side of
// the knee: what a fall is judged against.
double BestMean(const Outcomes& finished) {
  const int64_t cap = Cap(finished);
  double best = 0;
  for (const auto& [point, o] : finished) {
    if (o.kind == PointOutcome::Kind::kOk && !o.untrusted && !o.samples.empty() && point < cap) {
      best = std::max(best, o.objective);
    }
  }
  return best;
}

// The cost model's optimum between the knee and the largest point measured.
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

// Where the cost fit places the peak, when preemptions cost something it
// can see.
std::optional<int64_t> PlateauPeak(const Outcomes& finished, const Reading& r) {
  auto m = FitCost(finished, r);
  if (!m || m->g <= 0) return std::nullopt;
  return ModelOptimum(*m, r);
}

// Up to `n` points above `last`, kSpread apart, below the cap and the range's
// end, not measured yet.
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

// Past the knee: the points that show the cost model where throughput ends,
// then the model's optimum. `n` points at most.
std::vector<int64_t> ModelProbes(const SearchSpace& space, const Outcomes& finished,
                                 const Reading& r, size_t n, bool scan_only = false) {
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
  const double best_mean = BestMean(finished);
  const double noise = DecisionNoise(space, finished);
  for (auto it = finished.rbegin(); it != finished.rend(); ++it) {
    const auto& [last, o] = *it;
    if (o.kind != PointOutcome::Kind::kOk || !o.preemptions || last >= Cap(finished)) continue;
    const bool fallen = !o.untrusted && !o.samples.empty() &&
                        o.objective < best_mean * (1 - NoiseBand(noise, Runs(o), 1));
    if (fallen || (turned && *o.preemptions * kPreemptionsSeen >= last)) break;
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

}  // namespace

SearchDecision KneeSearch::Decide(const SearchSpace& space, const Outcomes& finished,
                                  size_t lookahead) const {
  SearchDecision d;
  const size_t k = std::max<size_t>(1, lookahead);
  if (RunsMeasured(finished) >= space.max_points) {
    d.done = true;
    d.reason = absl::StrCat("max_trials (", space.max_points, ") reached");
    return d;
  }
  const Reading r = Read(space, finished);
  std::string located;
  // Until a point measures ok, only infeasible points are known: they are
  // past the knee either way.
  const bool by_knee = r.signal || Trusted(finished, r).empty();
  std::vector<int64_t> probes = by_knee ? Probes(space, finished, r, k, &located)
                                        : PeakProbes(space, finished, r, k, &located);
  // A bracket whose point past the knee has not fallen: the peak may lie
  // up a plateau (ModelProbes), where the knee's bisection gains nothing.
  // Scan first; bisect only when the fall is seen and the cost fit does not
  // place the peak above the bracket.
  if (!probes.empty() && by_knee && r.signal && r.below &&
      r.past != std::numeric_limits<int64_t>::max() &&
      finished.at(r.past).kind == PointOutcome::Kind::kOk) {
    std::vector<int64_t> scan;
    if (RunsMeasured(finished) < kRefineBudget + 2 * (k - 1)) {
      scan = ModelProbes(space, finished, r, k, /*scan_only=*/true);
    }
    if (!scan.empty()) {
      probes = std::move(scan);
    } else if (auto up = PlateauPeak(finished, r); up && *up > r.past) {
      probes.clear();
      located = absl::StrCat("knee between ", *r.below, " and ", r.past,
                             ", peak up the plateau at ", *up);
    }
  }
  // Past the knee, the model's refinements stop at a budget of runs: on a
  // plateau its optimum wanders inside the noise and each probe gains little.
  if (probes.empty() && by_knee && RunsMeasured(finished) < kRefineBudget + 2 * (k - 1)) {
    // The scan takes every free node (one round covers the plateau); a
    // node its probes leave free confirms the best so far (below).
    probes = ModelProbes(space, finished, r, k);
    // Preemptions that cost nothing measurable: throughput decides, as
    // without the signal.
    if (auto m = FitCost(finished, r); probes.empty() && m && m->g <= 0) {
      std::string peaked;
      Reading flat = r;
      flat.signal = false;
      probes = PeakProbes(space, finished, flat, k, &peaked);
      if (probes.empty()) located = peaked;
    }
  }
  if (!probes.empty()) {
    d.wanted = std::move(probes);
    // A node the round leaves free confirms the best so far: on one node
    // this never happens, on several it saves the confirming round.
    std::optional<SearchAnswer> best = Best(space, finished);
    if (d.wanted.size() < k && best && best->runs < kMaxDecidingRuns) {
      d.wanted.push_back(best->point);
      d.runs[best->point] = static_cast<uint32_t>(kMaxDecidingRuns);
    }
    return d;
  }
  // Located: confirm the answer with a second run, which also measures the
  // noise band the report states; on throughput alone, also the runner-up
  // when the band cannot tell the two apart.
  std::optional<SearchAnswer> best = Best(space, finished);
  if (!best) {
    d.done = true;
    d.reason = absl::StrCat(located, "; no point measured without a flag");
    return d;
  }
  auto want = [&](int64_t point) {
    if (std::find(d.wanted.begin(), d.wanted.end(), point) != d.wanted.end()) return;
    d.wanted.push_back(point);
    d.runs[point] = static_cast<uint32_t>(kMaxDecidingRuns);
  };
  // With several nodes a confirming round has been spent once the repeats
  // (of the rounds' free nodes too) fill a round: the answer stands then,
  // even when those repeats moved it to a point measured once, which they
  // could not tell from the repeated ones beyond the band. Another
  // confirming round would cost a round and decide nothing the band sees.
  size_t repeats = 0;
  for (const auto& [point, o] : finished) repeats += o.runs > 1 ? o.runs - 1 : 0;
  const bool confirmed = k > 1 && repeats >= k;
  if (best->runs < kMaxDecidingRuns && !confirmed) {
    want(best->point);
    // Free nodes of the confirming round repeat the answer's rivals, the
    // highest means measured once (a free node costs no round, so any of
    // them): when the repeats move the answer to one of them, it is
    // confirmed already, and the search ends without another round. One
    // node keeps its runs for the answer.
    for (int64_t p : Rivals(space, finished, best->point, k > 1)) {
      if (d.wanted.size() >= k) break;
      want(p);
    }
  }

  if (!r.signal) {
    std::optional<int64_t> rival = RunnerUp(space, finished, r, best->point);
    if (rival && finished.at(*rival).samples.size() < kMaxDecidingRuns) want(*rival);
  }
  if (!d.wanted.empty()) return d;
  d.done = true;
  d.reason = absl::StrFormat("%s; best %d at %.4g token/s over %d runs", located, best->point,
                             best->objective, best->runs);
  return d;
}

size_t KneeSearch::PlannedPoints(const SearchSpace& space) const {
  if (space.hi < space.lo) return 0;
  const auto width = static_cast<double>(space.hi - space.lo + 1);
  const auto res = static_cast<double>(Resolution(space, space.initial));
  // Two to bracket, the halvings of a bracket of kSpread, one confirmation.
  const double halvings = std::ceil(std::log2(std::max(
      1.0,
      std::min(width, kSpread * static_cast<double>(std::max<int64_t>(1, space.initial))) / res)));
  return std::min<size_t>(space.max_points, static_cast<size_t>(3 + halvings));
}

std::optional<SearchAnswer> KneeSearch::Best(const SearchSpace& space,
                                             const Outcomes& finished) const {
  const Reading r = Read(space, finished);
  const std::optional<CostModel> model = FitCost(finished, r);
  if (!r.signal || (model && model->g <= 0)) {
    Reading flat = r;
    flat.signal = false;
    const auto usable = Trusted(finished, flat);
    const int64_t cap = Cap(finished);
    std::optional<int64_t> top;
    for (const auto& [point, o] : usable) {
      if (point < cap && (!top || o->objective > finished.at(*top).objective)) top = point;
    }
    if (!top) return SearchStrategy::Best(space, finished);
    return QualifiedAnswer(space, finished, *top);
  }
  if (const auto& m = model) {
    std::optional<int64_t> top;
    double top_speed = 0;
    for (const auto& [point, o] : finished) {
      if (o.kind != PointOutcome::Kind::kOk || o.untrusted || o.samples.empty()) continue;
      auto v = m->Speed(point);
      if (v && *v > top_speed) {
        top_speed = *v;
        top = point;
      }
    }
    if (top) return QualifiedAnswer(space, finished, MeasuredBetter(space, finished, *top));
  }
  const double noise = DecisionNoise(space, finished);
  // Below the knee throughput rises with the batch, so among the points that
  // the noise cannot tell from the best, the largest is the best guess. On
  // throughput alone a point just past the knee may hide in the band too:
  // there the best mean wins.
  const std::pair<const int64_t, PointOutcome>* top = nullptr;
  for (const auto& entry : finished) {
    const auto& [point, o] = entry;
    if (o.kind != PointOutcome::Kind::kOk || o.untrusted || o.samples.empty()) continue;
    if (r.side.at(point) != Side::kBelow || point > r.past) continue;
    if (top == nullptr || o.objective > top->second.objective) top = &entry;
  }
  if (top == nullptr) return SearchStrategy::Best(space, finished);
  int64_t chosen = top->first;
  for (const auto& [point, o] : finished) {
    if (!r.signal) break;
    if (point <= chosen || point > r.past || o.kind != PointOutcome::Kind::kOk || o.untrusted ||
        o.samples.empty() || r.side.at(point) != Side::kBelow) {
      continue;
    }
    if (o.objective >= top->second.objective * (1 - NoiseBand(noise, Runs(o), Runs(top->second)))) {
      chosen = point;
    }
  }
  return QualifiedAnswer(space, finished, MeasuredBetter(space, finished, chosen));
}

}  // namespace crest::controller
