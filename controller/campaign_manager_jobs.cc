// CampaignManager (campaign_manager.h), its jobs: launching a probe or a
// trial on a node (the launch record committed before the thread starts)
// and recording each as it ends, including the rate search's runs that
// follow one another on the same daemon. Scheduling and the campaigns'
// life cycle are in campaign_manager.cc; putting nodes back in
// campaign_put_back.cc.
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
#include "controller/search/node_slot.h"
#include "controller/search/rate_search.h"
#include "controller/search/schedule_plan.h"
#include "controller/search/trial_outcomes.h"

namespace crest::controller {

using crest::v1::Campaign;
using crest::v1::Trial;

absl::Status CampaignManager::CommitLaunch(Run& run, Batch batch, absl::string_view what) {
  // A campaign starts with its first job. The change is made in place, not
  // by assignment, so the caller's references into the campaign stay valid.
  const bool starting = run.stored.campaign.state() == crest::v1::CAMPAIGN_PENDING;
  const auto now = Now();
  if (starting) {
    Campaign& c = batch.campaigns.emplace_back(run.stored.campaign);
    c.set_state(crest::v1::CAMPAIGN_RUNNING);
    *c.mutable_started() = now;
  }
  CREST_RETURN_IF_ERROR(Persist(batch, run.stored.campaign.id(), what));
  if (starting) {
    run.stored.campaign.set_state(crest::v1::CAMPAIGN_RUNNING);
    *run.stored.campaign.mutable_started() = now;
  }
  UpdateCampaignMetrics();
  return absl::OkStatus();
}

void CampaignManager::LaunchProbe(Run& run, const std::string& model,
                                  const std::string& node_slot) {
  const std::string& id = run.stored.campaign.id();
  if (!CommitLaunch(run, Batch{}, "the start of the campaign").ok()) return;
  spdlog::info("campaign {} model {}: starting the daemon on {} to read npuBlockNum", id, model,
               node_slot);
  jobs_.StartProbe(
      id, model, ParseNodeSlot(node_slot), run.stored.campaign.spec(),
      [this](JobTable::Job* job, const ProbeResult& probe) { FinishProbe(job, probe); });
  notifier_.Changed(id);
}

void CampaignManager::LaunchTrial(Run& run, Trial trial) {
  const crest::v1::HostSpec& host = run.stored.campaign.spec().host();
  // Tuned once per node per campaign, and recorded with the trial, before
  // ApplyHostTuning is sent: a crash in between still restores the node.
  const bool tune = (!host.governor().empty() || !host.thp().empty()) &&
                    run.stored.tuned.count(trial.node()) == 0;
  Batch batch;
  batch.trials.push_back(trial);
  if (tune) batch.tuned.emplace_back(trial.campaign_id(), trial.node());
  if (!CommitLaunch(run, std::move(batch), absl::StrCat("trial ", trial.id())).ok()) return;
  if (tune) run.stored.tuned.insert(trial.node());
  run.stored.trials.push_back(trial);
  spdlog::info("campaign {} model {}: trial {} maxBatchSize {} (repeat {}, attempt {}{}) on {}",
               trial.campaign_id(), trial.model(), trial.id(), trial.parameters().max_batch_size(),
               trial.repeat(), trial.attempt(),
               trial.calibration()    ? ", calibration"
               : trial.confirmation() ? ", confirmation"
                                      : "",
               NodeSlotKey(trial.node(), trial.slot()));
  registry_->SetRunningTrial(trial.node(), trial.slot(), trial.id());
  // A sweep's job runs one trial after another: progress goes to the current one.
  auto on_progress = [this, campaign = trial.campaign_id(),
                      node_slot = NodeSlotKey(trial.node(), trial.slot())](
                         const crest::v1::BenchmarkProgress& progress) {
    absl::MutexLock lock(&mu_);
    const std::string id = jobs_.TrialOn(node_slot);
    if (id.empty()) return;
    runs_.at(campaign).progress[id] = progress;
    notifier_.Changed(campaign);
  };
  notifier_.Changed(trial.campaign_id());
  if (trial.rate_search()) {
    jobs_.StartSweep(
        run.stored.campaign.spec(), std::move(trial), tune, on_progress,
        [this](JobTable::Job* job, Trial ended) { return NextRateRun(job, std::move(ended)); },
        [this](JobTable::Job* job) { FinishSweep(job); });
    return;
  }
  jobs_.StartTrial(run.stored.campaign.spec(), std::move(trial), tune, on_progress,
                   [this](JobTable::Job* job, Trial ended) { FinishTrial(job, std::move(ended)); });
}

void CampaignManager::FinishProbe(JobTable::Job* job, const ProbeResult& probe) {
  absl::MutexLock lock(&mu_);
  Run& run = runs_.at(job->campaign);
  const crest::v1::CampaignSpec& spec = run.stored.campaign.spec();
  ModelState ms = run.stored.models[job->model];
  if (probe.npu_block_num > 0) {
    ms.npu_block_num = probe.npu_block_num;
    ms.probe_node = job->node;
    if (SetModelState(run, job->model, ms)) {
      SearchBounds b = DeriveBounds(spec, ms.npu_block_num);
      spdlog::info(
          "campaign {} model {}: npuBlockNum {} on {} -> maxBatchSize range [{}, {}]{}, start {}",
          job->campaign, job->model, ms.npu_block_num, job->node, b.lo, b.hi,
          b.capped_by_requests ? " (capped: the requests per run cannot fill a larger batch)" : "",
          b.initial);
    }
  } else if (probe.block_num_unknown) {
    // The same daemon will log the same at the next start: no retry. The
    // range cannot be derived; the fix is the agent's reason's.
    ModelState done = ms;
    done.done = true;
    done.done_reason = absl::StrCat("cannot derive the maxBatchSize range: npuBlockNum unknown on ",
                                    job->node, ": ", probe.reason);
    if (SetModelState(run, job->model, done)) {
      spdlog::warn("campaign {} model {}: search done: {}", job->campaign, job->model,
                   done.done_reason);
    }
  } else {
    if (!registry_->IsReady(job->node)) returning_.emplace(job->node, absl::InfinitePast());
    ++probe_failures_[absl::StrCat(job->campaign, "/", job->model)];
    if (probe.daemon_failed) {
      probe_failed_on_[absl::StrCat(job->campaign, "/", job->model)][job->node] = probe.reason;
    }
    spdlog::warn("campaign {} model {}: probe on {} failed: {}", job->campaign, job->model,
                 job->node, probe.reason);
  }
  job->finished = true;
  wake_ = true;
  notifier_.Changed(job->campaign);
}

void CampaignManager::FinishTrial(JobTable::Job* job, Trial trial) {
  registry_->SetRunningTrial(job->node, job->slot, "");
  absl::MutexLock lock(&mu_);
  RecordEnded(job, std::move(trial));
  job->finished = true;
  wake_ = true;
  notifier_.Changed(job->campaign);
}

void CampaignManager::RecordEnded(JobTable::Job* job, Trial trial) {
  *trial.mutable_finished() = Now();
  trial.set_neighbours(jobs_.TakeNeighbours(job));
  Run& run = runs_.at(job->campaign);
  // Lost with its trial: its daemon may still run there.
  if (trial.status() == crest::v1::TRIAL_INTERRUPTED && !registry_->IsReady(job->node)) {
    returning_.emplace(job->node, absl::InfinitePast());
  }
  Batch batch;
  batch.trials.push_back(trial);
  absl::Status s = Persist(batch, job->campaign, absl::StrCat("trial ", trial.id()));
  if (s.ok()) {
    if (metrics_ != nullptr) metrics_->RecordTrial(trial);
  } else {
    // Shown as it ended, though the store still has it running: a restart
    // re-runs it.
    trial.set_reason(absl::StrCat(trial.reason(), trial.reason().empty() ? "" : "; ",
                                  "not recorded: ", s.message()));
  }
  for (auto& t : run.stored.trials) {
    if (t.id() == trial.id()) t = trial;
  }
  run.progress.erase(trial.id());
  spdlog::info("campaign {} model {}: trial {} maxBatchSize {}{} on {}: {}{}{}",
               trial.campaign_id(), trial.model(), trial.id(), trial.parameters().max_batch_size(),
               trial.rate_search()
                   ? absl::StrCat(" at ", trial.parameters().request_rate(), " requests/s")
                   : "",
               trial.node(), crest::v1::TrialStatus_Name(trial.status()),
               trial.status() == crest::v1::TRIAL_OK
                   ? absl::StrCat(" GenerateSpeed ", trial.result().generate_speed(), " tok/s")
                   : "",
               trial.reason().empty() ? "" : " (" + trial.reason() + ")");
}

std::optional<Trial> CampaignManager::NextRateRun(JobTable::Job* job, Trial ended) {
  absl::MutexLock lock(&mu_);
  const Trial previous = ended;
  RecordEnded(job, std::move(ended));
  Run& run = runs_.at(job->campaign);
  const auto& spec = run.stored.campaign.spec();
  if (previous.status() != crest::v1::TRIAL_OK || job->stop.reason() != StopReason::kNone ||
      stopping_ || !writer_.error().ok() || run.stored.campaign.cancel_requested() ||
      !registry_->IsReady(job->node)) {
    return std::nullopt;
  }
  for (const auto& model : spec.models()) {
    if (model.name() != job->model) continue;
    // This job is the model's only one: the rate search runs on one node.
    const ModelState& ms = run.stored.models[model.name()];
    ModelPlan plan =
        PlanModel(spec, model, ms, run.stored.trials, *ModelStrategy(spec.search().strategy(), ms),
                  /*running=*/0,
                  /*free_nodes=*/1, probe_failures_[absl::StrCat(job->campaign, "/", model.name())],
                  EligibleNodeSlots(model, registry_->List()));
    if (plan.trials.size() != 1 || !plan.trials[0].rate_search ||
        !SameServerConfig(plan.trials[0].parameters, previous.parameters())) {
      return std::nullopt;
    }
    Trial next = StartedTrial(plan.trials[0], job->campaign, model.name(),
                              NodeSlotKey(job->node, job->slot), run.next_trial++, Now());
    Batch batch;
    batch.trials.push_back(next);
    if (!Persist(batch, job->campaign, absl::StrCat("trial ", next.id())).ok()) {
      return std::nullopt;
    }
    run.stored.trials.push_back(next);
    job->trial_id = next.id();
    registry_->SetRunningTrial(job->node, job->slot, next.id());
    spdlog::info(
        "campaign {} model {}: trial {} maxBatchSize {} at {} requests/s on {} (same daemon)",
        job->campaign, model.name(), next.id(), next.parameters().max_batch_size(),
        next.parameters().request_rate(), job->node);
    notifier_.Changed(job->campaign);
    return next;
  }
  return std::nullopt;
}

void CampaignManager::FinishSweep(JobTable::Job* job) {
  registry_->SetRunningTrial(job->node, job->slot, "");
  absl::MutexLock lock(&mu_);
  job->finished = true;
  wake_ = true;
  notifier_.Changed(job->campaign);
}

}  // namespace crest::controller
