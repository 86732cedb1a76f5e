#include "controller/search/chosen_point.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "controller/campaign_io/trial_kind.h"
#include "controller/search/kv_blocks.h"
#include "controller/search/trial_outcomes.h"

namespace crest::controller {
namespace {

using crest::v1::Trial;

}  // namespace

std::optional<ChosenPoint> ChosenPointOf(const crest::v1::CampaignSpec& spec,
                                         const std::string& model, const ModelState& state,
                                         const std::vector<Trial>& trials) {
  const std::unique_ptr<SearchStrategy> strategy = ModelStrategy(spec.search().strategy(), state);
  const int max_attempts = 1 + static_cast<int>(spec.limits().max_retries());
  const SearchSpace space = SearchSpaceFor(spec, state.npu_block_num);
  const auto outcomes = RepeatOutcomes(trials, model, false, max_attempts);
  // The factors the search compared its points with are also reported.
  std::map<std::string, NodeFactor> factors = NodeFactorsOf(outcomes, space.noise_prior);
  const auto finished =
      FinishedPoints(outcomes, std::max<uint32_t>(1, spec.search().repeats()), factors,
                     SearchMakeups(outcomes, space.max_points, spec.limits().max_retries()));
  std::optional<SearchAnswer> answer = strategy->Best(space, finished);
  if (!answer) return std::nullopt;
  ChosenPoint chosen;
  chosen.answer = *answer;
  chosen.noise = answer->noise.value_or(space.noise_prior);
  chosen.node_factors = std::move(factors);
  int n = 0;
  double speed = 0;
  for (const auto& t : trials) {
    if (t.model() != model || !IsSearchRun(t) || !OkAndTrusted(t) ||
        t.parameters().max_batch_size() != answer->point) {
      continue;
    }
    chosen.first_token_ms += t.result().first_token_time().average_ms();
    chosen.decode_ms += t.result().decode_time().average_ms();
    chosen.qps += t.result().qps();
    chosen.speed_per_client += t.result().generate_speed_per_client();
    speed += t.result().generate_speed();
    chosen.runs.push_back({answer->point, t.node(), t.result().generate_speed()});
    ++n;
  }
  if (n > 0) {
    // The search compared its points across nodes (node_effects.h); what is
    // reported, and what calibration is compared with, is what was measured.
    chosen.answer.objective = speed / n;
    chosen.first_token_ms /= n;
    chosen.decode_ms /= n;
    chosen.qps /= n;
    chosen.speed_per_client /= n;
  }
  return chosen;
}

}  // namespace crest::controller
