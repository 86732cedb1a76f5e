// The search of a campaign that learned from an earlier one (issue 39): a
// profile fitted to the earlier campaign's runs (sim/profile_fit.h)
// predicts the peak for this campaign's workload; WarmStartSearch measures
// the prediction and a bracket around it in one round and, unless a run
// contradicts the prediction beyond the noise band, answers there by the
// knee rules. Contradicted, it hands over to the knee search, which goes on
// from every run measured.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "controller/search/search.h"

namespace crest::controller {

// The bracket's half-width, relative to the prediction.
constexpr double kWarmBracket = 0.03;

class WarmStartSearch final : public SearchStrategy {
 public:
  // `predicted`: the predicted peak's maxBatchSize; `source` says where it
  // came from, for the report (e.g. "campaign c-12's fit").
  WarmStartSearch(int64_t predicted, std::string source);

  std::string Name() const override { return "warm-start"; }
  SearchDecision Decide(const SearchSpace& space, const Outcomes& finished,
                        size_t lookahead) const override;
  size_t PlannedPoints(const SearchSpace& space) const override;
  // Basis "prior" when the prediction held, "prior-contradicted" when the
  // knee search took over (its own basis in the reason).
  std::optional<SearchAnswer> Best(const SearchSpace& space,
                                   const Outcomes& finished) const override;

  // The prediction and its two neighbours, inside the range: centre first.
  std::vector<int64_t> Bracket(const SearchSpace& space) const;
  // Why the bracket's runs contradict the prediction (or, once the knee
  // search took over, that it did); nullopt while they do not, or are not
  // all measured.
  std::optional<std::string> Contradiction(const SearchSpace& space,
                                           const Outcomes& finished) const;

 private:
  int64_t predicted_;
  std::string source_;
  KneeSearch knee_;
};

}  // namespace crest::controller
