#include "controller/search/warm_start.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace crest::controller {
namespace {

bool Measured(const Outcomes& finished, int64_t point) { return finished.count(point) != 0; }

}  // namespace

WarmStartSearch::WarmStartSearch(int64_t predicted, std::string source)
    : predicted_(predicted), source_(std::move(source)) {}

std::vector<int64_t> WarmStartSearch::Bracket(const SearchSpace& space) const {
  const int64_t centre = std::clamp(predicted_, space.lo, std::max(space.lo, space.hi));
  const auto half = std::max<int64_t>(1, std::llround(static_cast<double>(centre) * kWarmBracket));
  std::vector<int64_t> out = {centre};
  for (int64_t p : {centre - half, centre + half}) {
    if (p >= space.lo && p <= space.hi && p != centre) out.push_back(p);
  }
  return out;
}

std::optional<std::string> WarmStartSearch::Contradiction(const SearchSpace& space,
                                                          const Outcomes& finished) const {
  const std::vector<int64_t> bracket = Bracket(space);
  for (int64_t p : bracket) {
    if (!Measured(finished, p)) return std::nullopt;
  }
  // Once the knee search took over, its runs outside the bracket say so,
  // whatever later repeats do to the bracket's means and the noise.
  for (const auto& [point, outcome] : finished) {
    if (std::find(bracket.begin(), bracket.end(), point) == bracket.end()) {
      return absl::StrCat("the knee search went on to ", point,
                          " after the bracket's runs contradicted the prediction");
    }
  }
  const PointOutcome& centre = finished.at(bracket[0]);
  if (!Usable(centre)) {
    return absl::StrCat("the predicted ", bracket[0], " did not measure (",
                        centre.reason.empty() ? "no trusted run" : centre.reason, ")");
  }
  const double noise = MeasuredNoise(finished).value_or(space.noise_prior);
  for (size_t i = 1; i < bracket.size(); ++i) {
    const PointOutcome& side = finished.at(bracket[i]);
    if (!Usable(side)) continue;
    const double band = NoiseBand(noise, side.samples.size(), centre.samples.size());
    if (side.objective > centre.objective * (1 + band)) {
      return absl::StrFormat(
          "%d measured %.4g token/s, %.1f%% above the predicted %d, beyond the noise band "
          "(%.1f%%)",
          bracket[i], side.objective, 100 * (side.objective / centre.objective - 1), bracket[0],
          100 * band);
    }
  }
  return std::nullopt;
}

SearchDecision WarmStartSearch::Decide(const SearchSpace& space, const Outcomes& finished,
                                       size_t lookahead) const {
  SearchDecision d;
  for (int64_t p : Bracket(space)) {
    if (!Measured(finished, p)) d.wanted.push_back(p);
  }
  if (!d.wanted.empty()) return d;
  if (auto why = Contradiction(space, finished)) {
    SearchDecision knee = knee_.Decide(space, finished, lookahead);
    if (knee.done) {
      knee.reason = absl::StrCat("the prediction of ", source_, " was contradicted (", *why,
                                 "); the knee search: ", knee.reason);
    }
    return knee;
  }
  d.done = true;
  d.reason = absl::StrCat("the prediction of ", source_, " (", Bracket(space)[0],
                          ") held over its bracket");
  return d;
}

size_t WarmStartSearch::PlannedPoints(const SearchSpace& space) const {
  return Bracket(space).size();
}

std::optional<SearchAnswer> WarmStartSearch::Best(const SearchSpace& space,
                                                  const Outcomes& finished) const {
  std::optional<SearchAnswer> answer = knee_.Best(space, finished);
  if (!answer) return answer;
  const std::string knee_basis =
      absl::StrCat(answer->basis.empty() ? "" : absl::StrCat(" (", answer->basis, ": "),
                   answer->basis_reason, answer->basis.empty() ? "" : ")");
  if (auto why = Contradiction(space, finished)) {
    answer->basis = "prior-contradicted";
    answer->basis_reason = absl::StrCat("the prediction of ", source_, " was contradicted (", *why,
                                        "), so the knee search went on from its runs", knee_basis);
  } else {
    answer->basis = "prior";
    answer->basis_reason =
        absl::StrCat("the prediction of ", source_, " (", Bracket(space)[0],
                     ") held over its bracket; the knee rules chose among its runs", knee_basis);
  }
  return answer;
}

}  // namespace crest::controller
