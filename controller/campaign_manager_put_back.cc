// CampaignManager (campaign_manager.h), putting nodes back: restoring the
// host settings of the nodes a campaign tuned when it ends, and, for nodes
// heard from again after being lost, stopping the daemon an interrupted
// trial left before restoring the campaigns that ended meanwhile.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/time_util.h"

#include "common/status.h"
#include "controller/campaign_io/batch_fill.h"
#include "controller/campaign_io/spec_validator.h"
#include "controller/campaign_manager.h"
#include "controller/campaign_report.h"
#include "controller/campaign_view.h"
#include "controller/search/kv_blocks.h"
#include "controller/search/schedule_plan.h"
#include "controller/search/trial_outcomes.h"

namespace crest::controller {

using crest::v1::Campaign;

void CampaignManager::RestoreHosts(const std::string& campaign_id, bool finish) {
  Run& run = runs_.at(campaign_id);
  run.finishing = true;
  std::vector<const StoredCampaign*> running;
  for (const auto& [other_id, other] : runs_) {
    if (other_id != campaign_id && !IsFinal(other.stored.campaign.state())) {
      running.push_back(&other.stored);
    }
  }
  restorer_.Restore(
      campaign_id, NodesToRestore(run.stored, running),
      [this, campaign_id](const std::string& node) {
        absl::MutexLock lock(&mu_);
        Batch batch;
        batch.restored.emplace_back(campaign_id, node);
        if (Persist(batch, campaign_id, absl::StrCat("the host restore of ", node)).ok()) {
          runs_.at(campaign_id).stored.restored.insert(node);
        }
      },
      [this, campaign_id, finish](const std::vector<std::string>& unrestored) {
        EndCampaign(campaign_id, finish, unrestored);
      });
}

// Between attempts to put back a node that answers again but failed a call.
constexpr absl::Duration kRetryPutBack = absl::Seconds(2);

void CampaignManager::ResetReturnedNodes() {
  for (auto it = returning_.begin(); it != returning_.end();) {
    const std::string node = it->first;
    if (!registry_->IsReady(node) || jobs_.NodeBusy(node) || clock_->Now() < it->second) {
      ++it;
      continue;
    }
    it = returning_.erase(it);
    resetting_.insert(node);
    restorer_.StopLeftDaemon(node, [this, node](bool stopped) {
      absl::MutexLock lock(&mu_);
      resetting_.erase(node);
      if (!stopped) {
        returning_.emplace(node, clock_->Now() + kRetryPutBack);
        return;
      }
      for (const auto& id : order_) {
        Run& run = runs_.at(id);
        if (IsFinal(run.stored.campaign.state()) && !run.finishing &&
            run.stored.tuned.count(node) != 0 && run.stored.restored.count(node) == 0) {
          RestoreHosts(id, /*finish=*/false);
        }
      }
      wake_ = true;
    });
  }
}

void CampaignManager::EndCampaign(const std::string& campaign_id, bool finish,
                                  const std::vector<std::string>& unrestored) {
  absl::MutexLock lock(&mu_);
  for (const auto& node : unrestored) returning_.emplace(node, clock_->Now() + kRetryPutBack);
  Run& run = runs_.at(campaign_id);
  run.finishing = false;
  if (!finish || IsFinal(run.stored.campaign.state())) return;
  Campaign c = run.stored.campaign;
  SetCampaignEnd(run.stored, unrestored, &c);
  *c.mutable_finished() = Now();
  Batch batch;
  batch.campaigns.push_back(c);
  if (!Persist(batch, campaign_id, "the end of the campaign").ok()) return;
  run.stored.campaign = c;
  spdlog::info("campaign {} ended: {}{}", campaign_id, crest::v1::CampaignState_Name(c.state()),
               c.reason().empty() ? "" : " (" + c.reason() + ")");
  UpdateCampaignMetrics();
  notifier_.Changed(campaign_id);
}

}  // namespace crest::controller
