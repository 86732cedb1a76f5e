#include "controller/search/knee_reading.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace crest::controller::knee {
namespace {

double Mean(const PointOutcome& o) { return o.objective; }

}  // namespace

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
  double variance = (sum_sq + kPriorWeight * space.noise_prior * space.noise_prior) /
                    (static_cast<double>(dof) + kPriorWeight);
  // A busy neighbour slot is one more source of noise, independent of the
  // run's own: once any run was measured beside one, every comparison may
  // involve it.
  for (const auto& [point, o] : finished) {
    if (o.beside_neighbours > 0) {
      variance += space.neighbour_noise * space.neighbour_noise;
      break;
    }
  }
  return std::sqrt(variance);
}

size_t Runs(const PointOutcome& o) { return std::max<size_t>(1, o.samples.size()); }

bool MeasuresUnder(double noise, const PointOutcome& o, const PointOutcome& ref, double z) {
  return o.objective < ref.objective * (1 - NoiseBand(noise, Runs(o), Runs(ref), z));
}

Reading Read(const SearchSpace& space, const Outcomes& finished, bool use_counter) {
  Reading r;
  for (const auto& [point, o] : finished) {
    r.signal |= use_counter && o.kind == PointOutcome::Kind::kOk && o.preemptions.has_value();
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

std::optional<int64_t> CheckPoint(const SearchSpace& space, const Reading& r) {
  if (!r.below) return std::nullopt;
  int64_t at = space.initial;
  if (static_cast<double>(at) > 0.9 * static_cast<double>(*r.below)) {
    at = static_cast<int64_t>(0.8 * static_cast<double>(*r.below));
  }
  at = std::max(at, space.lo);
  // Too close to the knee to show a rise the noise cannot hide.
  if (static_cast<double>(at) > kFarBelowKnee * static_cast<double>(*r.below)) return std::nullopt;
  return at;
}

namespace {

using Entry = std::pair<int64_t, const PointOutcome*>;

bool Settled(const PointOutcome& a, const PointOutcome& b) {
  return Runs(a) >= kMaxDecidingRuns && Runs(b) >= kMaxDecidingRuns;
}

}  // namespace

bool FarAboveGuess(const SearchSpace& space, const Reading& r) {
  return r.signal && r.below && space.knee_guess > 0 &&
         static_cast<double>(*r.below) >
             (1 + kFarFromGuess) * static_cast<double>(space.knee_guess);
}

std::vector<int64_t> CheckPoints(const SearchSpace& space, const Reading& r) {
  std::vector<int64_t> points;
  const std::optional<int64_t> first = CheckPoint(space, r);
  if (!first) return points;
  points.push_back(*first);
  if (!FarAboveGuess(space, r)) return points;
  const int64_t middle = (*first + space.knee_guess) / 2;
  if (middle - *first >= Resolution(space, middle)) points.push_back(middle);
  return points;
}

ModelCheck CheckKneeModel(const SearchSpace& space, const Outcomes& finished, const Reading& r) {
  ModelCheck check;
  if (!r.signal) return check;
  const double noise = DecisionNoise(space, finished);
  bool counted = false;  // some point published a preemption
  std::vector<Entry> below;
  for (const auto& [point, o] : finished) {
    if (o.kind != PointOutcome::Kind::kOk || o.untrusted || o.samples.empty()) continue;
    counted |= o.preemptions.value_or(0) > 0;
    if (point < r.past && r.side.at(point) == Side::kBelow) below.emplace_back(point, &o);
  }
  const char* what = counted ? "throughput falls below the knee, with no preemption"
                             : "the preemption counter stays at 0 while throughput falls";
  auto says = [&](const Entry& low, const Entry& high) {
    return absl::StrFormat("%s: %.4g token/s at %d, %.1f%% under %.4g at %d", what,
                           high.second->objective, high.first,
                           100 * (1 - high.second->objective / low.second->objective),
                           low.second->objective, low.first);
  };
  // Each point against the best smaller one: a fall beyond kBreakZ, or
  // beyond the usual band once both are settled; a fall beyond the band
  // before that is settled first.
  const Entry* best = nullptr;
  // A fall right at the knee's edge is the knee itself (the cache fills
  // before the first preemption): not counted.
  const double edge = r.past == std::numeric_limits<int64_t>::max()
                          ? std::numeric_limits<double>::infinity()
                          : kKneeEdge * static_cast<double>(r.past);
  for (size_t i = 0; i < below.size(); ++i) {
    const Entry& e = below[i];
    if (best != nullptr && static_cast<double>(e.first) < edge) {
      // Against every smaller point, not only the best: a fall settled
      // between two points stays a fall when a third, measured once, reads
      // higher than both.
      for (size_t j = 0; j < i; ++j) {
        const Entry& low = below[j];
        const bool settled = Settled(*low.second, *e.second);
        if (MeasuresUnder(noise, *e.second, *low.second, settled ? 2.0 : kBreakZ)) {
          check.broken = says(low, e);
          return check;
        }
      }
      if (!Settled(*best->second, *e.second) && check.settle.empty() &&
          MeasuresUnder(noise, *e.second, *best->second)) {
        check.settle = {best->first, e.first};
      }
    }
    if (best == nullptr || e.second->objective > best->second->objective) best = &e;
  }
  // The check point against the points near the knee: the model wants it
  // clearly lower. Settled against one of them as high or higher, the model
  // is broken (for good: more runs elsewhere do not move those two means);
  // unless the best of them is clearly (2 standard errors) above it, the two
  // are settled. A host-side cost can put the peak below the knee by less
  // than the noise band, and only more runs tell the two apart.
  const double near_knee = kNearKnee * static_cast<double>(r.below.value_or(0));
  std::optional<std::pair<const Entry*, const Entry*>> unsettled;
  for (int64_t at : CheckPoints(space, r)) {
    auto c =
        std::find_if(below.begin(), below.end(), [&](const Entry& e) { return e.first == at; });
    if (c == below.end()) continue;
    const Entry* top = nullptr;
    for (const Entry& e : below) {
      if (e.first <= c->first) continue;
      if (Settled(*c->second, *e.second) && e.second->objective <= c->second->objective) {
        check.broken = says(*c, e);
        return check;
      }
      if (static_cast<double>(e.first) >= near_knee &&
          (top == nullptr || e.second->objective > top->second->objective)) {
        top = &e;
      }
    }
    // The highest check point the knee does not clearly beat is settled.
    if (top != nullptr && !Settled(*c->second, *top->second) &&
        !MeasuresUnder(noise, *c->second, *top->second) &&
        (!unsettled || c->second->objective > unsettled->first->second->objective)) {
      unsettled.emplace(&*c, top);
    }
  }
  check.doubted =
      unsettled && unsettled->first->second->objective >= unsettled->second->second->objective;
  if (check.settle.empty() && unsettled) {
    check.settle = {unsettled->first->first, unsettled->second->first};
  }
  return check;
}

std::string FarFromGuess(const SearchSpace& space, const Reading& r) {
  if (!r.signal || !r.below || r.past == std::numeric_limits<int64_t>::max() ||
      space.knee_guess <= 0) {
    return "";
  }
  const double knee = 0.5 * static_cast<double>(*r.below + r.past);
  const double off = knee / static_cast<double>(space.knee_guess) - 1;
  if (std::abs(off) <= kFarFromGuess) return "";
  return absl::StrFormat("; the knee lies %.0f%% %s the block-count guess (%d)",
                         100 * std::abs(off), off < 0 ? "below" : "above", space.knee_guess);
}

size_t FirstRound(const SearchSpace& space, size_t places) {
  return std::clamp<size_t>(places, 1, std::max<size_t>(1, space.max_points / 2));
}

std::optional<double> WideSpacing(const SearchSpace& space, size_t places) {
  const size_t n = FirstRound(space, places);
  if (n < kWideRound) return std::nullopt;
  return (kWideBelow + kWideAbove) / static_cast<double>(n - 1);
}

int64_t Resolution(const SearchSpace& space, int64_t at, std::optional<double> wide) {
  const double relative = std::max(space.resolution, wide.value_or(0));
  // Rounding makes a wide round's neighbours up to one apart more.
  return std::max<int64_t>(
      1, static_cast<int64_t>(std::floor(relative * static_cast<double>(at))) + (wide ? 1 : 0));
}

std::vector<std::pair<int64_t, const PointOutcome*>> Trusted(const Outcomes& finished,
                                                             const Reading& r) {
  // A point at or above the lowest failure is infeasible to the search as
  // to its answer (BestPoint), even when it once measured ok: the probes
  // around the best assume the best lies below the cap.
  const int64_t cap = Cap(finished);
  std::vector<std::pair<int64_t, const PointOutcome*>> out;
  for (const auto& [point, o] : finished) {
    if (TrustedBelow(point, o, cap) && (point < r.past || !r.signal)) {
      out.emplace_back(point, &o);
    }
  }
  return out;
}

int64_t Cap(const Outcomes& finished) {
  int64_t cap = std::numeric_limits<int64_t>::max();
  for (const auto& [point, o] : finished) {
    if (o.kind != PointOutcome::Kind::kOk) cap = std::min(cap, point);
  }
  return cap;
}

bool TrustedBelow(int64_t point, const PointOutcome& o, int64_t cap) {
  return o.kind == PointOutcome::Kind::kOk && !o.untrusted && !o.samples.empty() && point < cap;
}

std::optional<int64_t> BestPoint(const Outcomes& finished) {
  const int64_t cap = Cap(finished);
  std::optional<int64_t> best;
  for (const auto& [point, o] : finished) {
    if (TrustedBelow(point, o, cap) && (!best || o.objective >= finished.at(*best).objective)) {
      best = point;
    }
  }
  return best;
}

double BestMean(const Outcomes& finished) {
  const std::optional<int64_t> best = BestPoint(finished);
  return best ? finished.at(*best).objective : 0;
}

}  // namespace crest::controller::knee
