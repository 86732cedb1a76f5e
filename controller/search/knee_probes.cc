#include "controller/search/knee_probes.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace crest::controller::knee {

std::vector<int64_t> Probes(const SearchSpace& space, const Outcomes& finished, const Reading& r,
                            size_t k, std::optional<double> wide, std::string* why_done) {
  const int64_t hi = std::min(space.hi, r.past - 1);
  // A wide search steps out at its own spacing: its first round missed the
  // window, most likely only just.
  const double spread = wide.value_or(kSpread);
  std::vector<double> raw;
  if (!r.below && r.past == std::numeric_limits<int64_t>::max()) {
    // Nothing known: k points around the predicted knee, or over the window
    // where it lies when the round is wide.
    const auto c = static_cast<double>(
        std::clamp(space.knee_guess > 0 ? space.knee_guess : space.initial, space.lo, space.hi));
    if (wide) {
      for (size_t i = 0; i < k; ++i) {
        raw.push_back(c * (1 - kWideBelow + *wide * static_cast<double>(i)));
      }
    } else {
      for (size_t i = 0; i < k; ++i) {
        raw.push_back(c *
                      (1 + kSpread * (static_cast<double>(i) - (static_cast<double>(k) - 1) / 2)));
      }
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
    const double step = std::max(spread * static_cast<double>(r.past),
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
    const double step = std::max(spread * static_cast<double>(*r.below),
                                 static_cast<double>(*r.below - near) / static_cast<double>(k));
    for (size_t i = 1; i <= k; ++i) raw.push_back(static_cast<double>(*r.below) + step * i);
  } else {
    const int64_t gap = r.past - *r.below;
    if (gap <= Resolution(space, *r.below, wide)) {
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

namespace {

// Points of the coarse scan over [lo, hi] when no block count predicts the
// peak: kScanPoints spaced evenly in log(maxBatchSize), ends included.
std::vector<int64_t> ScanPoints(const SearchSpace& space, int64_t hi) {
  std::vector<int64_t> out;
  if (hi < space.lo) return out;
  const double lo = std::log(static_cast<double>(std::max<int64_t>(1, space.lo)));
  const double top = std::log(static_cast<double>(std::max<int64_t>(1, hi)));
  for (size_t i = 0; i < kScanPoints; ++i) {
    const double x =
        lo + (top - lo) * static_cast<double>(i) / static_cast<double>(kScanPoints - 1);
    const auto p = std::clamp<int64_t>(std::llround(std::exp(x)), space.lo, hi);
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

// The first points on throughput alone: the unmeasured points of the scan
// when nothing predicts the peak, else k points around the guess.
std::vector<double> FirstPeakPoints(const SearchSpace& space, const Outcomes& finished, int64_t hi,
                                    size_t k) {
  std::vector<double> raw;
  if (space.knee_guess <= 0) {
    for (int64_t p : ScanPoints(space, hi)) {
      if (finished.count(p) == 0 && raw.size() < k) raw.push_back(static_cast<double>(p));
    }
    return raw;
  }
  const auto c = static_cast<double>(std::clamp(space.knee_guess, space.lo, hi));
  for (size_t i = 0; i < k; ++i) {
    raw.push_back(c * (1 + kSpread * (static_cast<double>(i) - (static_cast<double>(k) - 1) / 2)));
  }
  return raw;
}

// Once a bracket is narrow, a side whose every point reads level with the
// best (within one standard error) has not shown that the top ends there:
// the point `step` past that side's far end, if there is one to measure.
std::optional<int64_t> PastALevelSide(
    const SearchSpace& space, const Outcomes& finished,
    const std::vector<std::pair<int64_t, const PointOutcome*>>& usable, size_t m, double noise,
    int64_t step, int64_t hi) {
  bool left_level = m > 0;
  bool right_level = m + 1 < usable.size();
  for (size_t i = 0; i < usable.size(); ++i) {
    if (i == m) continue;
    const bool level = !MeasuresUnder(noise, *usable[i].second, *usable[m].second, 1.0);
    (i < m ? left_level : right_level) &= level;
  }
  const int64_t below = usable.front().first - step;
  if (left_level && below >= space.lo && finished.count(below) == 0) return below;
  const int64_t above = usable.back().first + step;
  if (right_level && above <= hi && finished.count(above) == 0) return above;
  return std::nullopt;
}

}  // namespace

std::vector<int64_t> PeakProbes(const SearchSpace& space, const Outcomes& finished,
                                const Reading& r, size_t k, std::string* why_done) {
  const int64_t cap = Cap(finished);
  const int64_t hi = std::min(space.hi, cap - 1);
  auto usable = Trusted(finished, r);
  std::vector<double> raw;
  // Without a guess the scan comes first, whole: a curve that is not
  // unimodal (a dip, a second rise) shows itself only at that scale.
  const bool scanning = space.knee_guess <= 0 && !FirstPeakPoints(space, finished, hi, 1).empty();
  if (usable.empty() || scanning) {
    if (hi < space.lo) {
      *why_done = "every point up to the range's low end is infeasible";
      return {};
    }
    raw = FirstPeakPoints(space, finished, hi, k);
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
    // Throughput alone cannot place the peak closer than its noise does.
    const int64_t res =
        std::max(Resolution(space, at),
                 static_cast<int64_t>(std::floor(kPeakResolution * static_cast<double>(at))));
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
      // Never below the best (a best above the range's top, from a resumed
      // campaign whose range shrank): the widths below are counts.
      const int64_t hi_n = std::max(at, right.value_or(std::min(hi + 1, cap)));
      const double noise = DecisionNoise(space, finished);
      const PointOutcome& b = *usable[m].second;
      auto level = [&](std::optional<int64_t> n) {
        return !MeasuresUnder(noise, finished.at(*n), b, 1.0);
      };
      const int64_t step_out = std::max<int64_t>(res, std::llround(spread));
      if (hi_n - lo_n <= 2 * res) {
        if (auto p = PastALevelSide(space, finished, usable, m, noise, step_out, hi)) return {*p};
        *why_done = absl::StrCat("throughput peaks at ", at, " between ", lo_n, " and ", hi_n);
        return {};
      }
      // A narrow bracket whose two neighbours lie within one standard
      // error of the best: the top is level at the noise's scale, and a
      // point between them gains nothing a run could show.
      if (left && right &&
          static_cast<double>(hi_n - lo_n) <= kLevelBracket * static_cast<double>(at) &&
          level(left) && level(right)) {
        if (auto p = PastALevelSide(space, finished, usable, m, noise, step_out, hi)) return {*p};
        *why_done = absl::StrCat("throughput is level around ", at, " from ", lo_n, " to ", hi_n);
        return {};
      }
      // k points over the two sides of the best, by their widths. One point
      // goes to the side of the higher neighbour, where a peak between two
      // lower points more likely lies (to the wider side when a side is
      // already as narrow as the resolution).
      const auto wl = static_cast<double>(at - lo_n);
      const auto wr = static_cast<double>(hi_n - at);
      auto n_left = static_cast<size_t>(std::llround(static_cast<double>(k) * wl / (wl + wr)));
      if (k == 1) {
        const bool both_open =
            left && right && wl > static_cast<double>(res) && wr > static_cast<double>(res);
        n_left =
            both_open ? (finished.at(*left).objective > finished.at(*right).objective) : (wl > wr);
      }
      // A neighbour beyond kBreakZ under the best while the other is not is
      // a cliff: throughput rises until something runs out and then drops,
      // so the peak lies at the cliff's edge. One run goes there first.
      auto cliff = [&](std::optional<int64_t> n) {
        return MeasuresUnder(noise, finished.at(*n), b, kBreakZ);
      };
      if (k == 1 && right && wr > static_cast<double>(res) && cliff(right) &&
          !(left && cliff(left))) {
        n_left = 0;
      }
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

std::optional<int64_t> RunnerUp(const SearchSpace& space, const Outcomes& finished,
                                const Reading& r, int64_t best) {
  const double noise = DecisionNoise(space, finished);
  const PointOutcome& b = finished.at(best);
  std::optional<int64_t> rival;
  for (const auto& [point, o] : Trusted(finished, r)) {
    if (point == best) continue;
    if (MeasuresUnder(noise, *o, b)) continue;
    if (!rival || o->objective > finished.at(*rival).objective) rival = point;
  }
  return rival;
}

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
    if (any || !MeasuresUnder(noise, o, a)) {
      rivals.emplace_back(-o.objective, point);
    }
  }
  std::sort(rivals.begin(), rivals.end());
  std::vector<int64_t> out;
  out.reserve(rivals.size());
  for (const auto& [neg, point] : rivals) out.push_back(point);
  return out;
}

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

}  // namespace crest::controller::knee
