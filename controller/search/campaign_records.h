// What a campaign has recorded, as plain values: its trials, what the
// controller learnt of each model outside them, the nodes it tuned. The
// store persists these; the search, the planner and the report read them.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "crest/v1/controller.pb.h"

namespace crest::controller {

// What the controller learnt about one model of a campaign outside its trials.
struct ModelState {
  int64_t npu_block_num = 0;  // from the probe start (0: not probed)
  std::string probe_node;
  bool done = false;
  std::string done_reason;
  // search.prior (controller/campaign_prior.h): the profile fitted to the
  // prior campaign's runs of this model, at creation ("": none, or the fit
  // failed), where it came from, and what the prior's daemon reported.
  std::string prior_profile;
  std::string prior_source;
  int64_t prior_block_num = 0;
  // The peak the fit predicts for this campaign's workload (0: not yet), or
  // why it predicts none, and the search starts cold.
  int64_t prior_peak = 0;
  std::string prior_note;
  // The predicted curve: maxBatchSize -> noise-free GenerateSpeed.
  std::vector<std::pair<int64_t, double>> prior_curve;
};

// One model of one campaign: the key of per-model state.
struct CampaignModel {
  std::string campaign;
  std::string model;
};

struct StoredCampaign {
  crest::v1::Campaign campaign;
  std::vector<crest::v1::Trial> trials;  // in creation order
  std::map<std::string, ModelState> models;
  std::set<std::string> tuned;     // nodes whose host tuning this campaign applied
  std::set<std::string> restored;  // of those, the ones restored already
};

// `model`'s recorded search state in `stored`; the empty state before any.
ModelState ModelStateOf(const StoredCampaign& stored, const std::string& model);

bool IsFinal(crest::v1::TrialStatus status);
bool IsFinal(crest::v1::CampaignState state);

}  // namespace crest::controller
