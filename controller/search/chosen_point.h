// The search's answer for one model with the means of its runs, as a pure
// function of its recorded trials: what the calibration, the rate search, the
// report and the metrics all start from.
#pragma once
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "controller/search/campaign_records.h"
#include "controller/search/node_effects.h"
#include "controller/search/search.h"
#include "controller/search/trial_outcomes.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

// The search's answer for a model with the figures of its runs.
struct ChosenPoint {
  SearchAnswer answer;
  // Mean over the answer's trusted ok runs.
  double first_token_ms = 0;
  double decode_ms = 0;
  double qps = 0;
  double speed_per_client = 0;
  // Relative noise of one run: measured by the search, else its prior.
  double noise = 0.02;
  // The answer's trusted runs with their nodes, and each node's speed as the
  // search estimated it (node_effects.h; 1 where no factor applies): the
  // calibration runs on the answer's nodes first and is compared with the
  // answer within a node.
  std::vector<NodeRun> runs;
  std::map<std::string, NodeFactor> node_factors;
};

// The search's answer for `model` (SearchStrategy::Best over its search
// trials) with the means of its runs; nullopt when no point is usable.
std::optional<ChosenPoint> ChosenPointOf(const crest::v1::CampaignSpec& spec,
                                         const std::string& model, const ModelState& state,
                                         const std::vector<crest::v1::Trial>& trials);

}  // namespace crest::controller
