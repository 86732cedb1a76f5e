// The progress view of a campaign that Get, List and WatchCampaign return:
// per model the trials done, failed and planned, the best point so far, the
// searched range, and what runs right now. A function of the stored campaign
// (each model's strategy follows from it) and its running jobs only, so the
// manager computes it under its lock and every watcher sees the same
// snapshot.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "controller/search/search.h"
#include "controller/store.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

// One job of the campaign running on a node.
struct RunningJob {
  std::string node;
  std::string model;
  std::string trial_id;  // empty: the npuBlockNum probe
};

// `jobs`: the campaign's running jobs in node order; `progress`: the latest
// benchmark progress by trial id; `halted`: why nothing more is scheduled
// although the campaign has not ended ("" when it is not halted).
crest::v1::Campaign CampaignView(
    const StoredCampaign& stored, const std::vector<RunningJob>& jobs,
    const std::map<std::string, crest::v1::BenchmarkProgress>& progress,
    absl::string_view halted = "");

}  // namespace crest::controller
