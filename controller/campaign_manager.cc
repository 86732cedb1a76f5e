#include "controller/campaign_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/time_util.h"

#include "common/paths.h"
#include "common/status.h"
#include "controller/campaign_io/batch_fill.h"
#include "controller/campaign_io/report.h"
#include "controller/campaign_io/spec_validator.h"
#include "controller/campaign_prior.h"
#include "controller/campaign_report.h"
#include "controller/campaign_view.h"
#include "controller/search/kv_blocks.h"
#include "controller/search/node_slot.h"
#include "controller/search/schedule_plan.h"
#include "controller/search/trial_outcomes.h"

namespace crest::controller {

using crest::v1::Campaign;

namespace {

// Where a search.prior's fit finds the shipped profiles and GSM8K.
absl::StatusOr<std::string> PriorShareDir(const ManagerOptions& options) {
  if (!options.share_dir.empty()) return options.share_dir;
  return ShareDir();
}

}  // namespace

CampaignManager::CampaignManager(StateStore* store, AgentRegistry* registry,
                                 AgentConnector* connector, const Clock* clock, Metrics* metrics,
                                 ManagerOptions options)
    : store_(store),
      registry_(registry),
      clock_(clock),
      metrics_(metrics),
      options_(options),
      writer_(store),
      jobs_(registry, connector, options.call_timeout),
      prober_(registry, connector, options.probe_interval, options.call_timeout),
      restorer_(registry, connector, options.call_timeout),
      notifier_([this](const std::string& id) { return Get(id); }) {}

CampaignManager::~CampaignManager() { Shutdown(); }

google::protobuf::Timestamp CampaignManager::Now() const {
  return google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(clock_->Now()));
}

absl::Status CampaignManager::Start() {
  CREST_ASSIGN_OR_RETURN(Snapshot snap, store_->Load());
  registry_->Restore(snap.agents);
  std::vector<std::string> to_restore;
  {
    absl::MutexLock lock(&mu_);
    Batch batch;
    for (auto& stored : snap.campaigns) {
      Run run;
      run.stored = std::move(stored);
      run.next_trial = NextTrialNumber(run.stored.trials);
      for (auto& t : InterruptUnfinished(&run.stored.trials, Now())) batch.trials.push_back(t);
      const std::string id = run.stored.campaign.id();
      if (!IsFinal(run.stored.campaign.state())) {
        spdlog::info("resuming campaign {} ({} trials recorded)", id, run.stored.trials.size());
      } else if (!NodesToRestore(run.stored, {}).empty()) {
        to_restore.push_back(id);
      }
      order_.push_back(id);
      runs_[id] = std::move(run);
    }
    CREST_RETURN_IF_ERROR(Persist(batch, "", "the trials the restart interrupted"));
    for (const auto& t : batch.trials) {
      if (metrics_ != nullptr) metrics_->RecordTrial(t);
    }
    for (const auto& id : to_restore) RestoreHosts(id, /*finish=*/false);
    UpdateCampaignMetrics();
    wake_ = true;
  }
  loop_ = std::thread([this] { Loop(); });
  prober_.Start();
  notifier_.Start();
  return absl::OkStatus();
}

void CampaignManager::Shutdown() {
  std::vector<std::unique_ptr<JobTable::Job>> jobs;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    jobs_.Stop("", StopReason::kShutdown);
  }
  if (loop_.joinable()) loop_.join();
  prober_.Stop();
  {
    absl::MutexLock lock(&mu_);
    jobs = jobs_.Take(/*all=*/true);
  }
  JobTable::Join(std::move(jobs));
  restorer_.Join();
  notifier_.Stop();
}

absl::Status CampaignManager::persistence_error() const {
  absl::MutexLock lock(&mu_);
  return writer_.error();
}

void CampaignManager::SetOnPersistenceError(std::function<void(const absl::Status&)> cb) {
  on_persistence_error_ = std::move(cb);
}

absl::Status CampaignManager::Persist(const Batch& batch, const std::string& campaign_id,
                                      absl::string_view what) {
  const bool first = writer_.error().ok();
  absl::Status s = writer_.Apply(batch, what);
  if (!s.ok() && first) {
    wake_ = true;  // the loop reports it
    if (!campaign_id.empty()) FailCampaign(campaign_id);
  }
  return s;
}

void CampaignManager::FailCampaign(const std::string& id) {
  auto it = runs_.find(id);
  if (it == runs_.end() || IsFinal(it->second.stored.campaign.state())) return;
  Campaign& c = it->second.stored.campaign;
  c.set_state(crest::v1::CAMPAIGN_FAILED);
  c.set_reason(absl::StrCat("controller state store failed: ", writer_.error().message()));
  *c.mutable_finished() = Now();
  // If the store works again, a restart then shows why the campaign ended.
  Batch batch;
  batch.campaigns.push_back(c);
  absl::Status s = writer_.ApplyDespiteError(batch);
  spdlog::error("campaign {} failed: {}{}", id, c.reason(),
                s.ok() ? "" : absl::StrCat(" (not recorded either: ", s.message(), ")"));
  UpdateCampaignMetrics();
  notifier_.Changed(id);
}

absl::StatusOr<Campaign> CampaignManager::Create(crest::v1::CampaignSpec spec) {
  ApplySpecDefaults(&spec);
  CREST_RETURN_IF_ERROR(CheckCampaignSpec(spec));
  CREST_RETURN_IF_ERROR(CheckAgentLimits(spec, registry_->List()));
  CREST_RETURN_IF_ERROR(MakeStrategy(spec.search().strategy()).status());
  std::vector<std::string> prior_warnings;
  CREST_ASSIGN_OR_RETURN(auto prior_states, FitPriors(spec, &prior_warnings));
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the controller is shutting down");
  if (!writer_.error().ok()) return writer_.Refusal();
  CREST_ASSIGN_OR_RETURN(int64_t number, store_->NextCampaignNumber());
  Run run;
  run.stored.models = std::move(prior_states);
  Campaign& c = run.stored.campaign;
  c.set_id(absl::StrCat("c", number));
  *c.mutable_spec() = std::move(spec);
  c.set_state(crest::v1::CAMPAIGN_PENDING);
  for (std::string& w : SpecWarnings(c.spec())) c.add_warnings(std::move(w));
  for (std::string& w : prior_warnings) c.add_warnings(std::move(w));
  *c.mutable_created() = Now();
  Batch batch;
  batch.campaigns.push_back(c);
  for (const auto& [model, state] : run.stored.models)
    batch.models.push_back({{c.id(), model}, state});
  CREST_RETURN_IF_ERROR(Persist(batch, "", "the campaign"));
  spdlog::info("campaign {} '{}' created with {} models", c.id(), c.spec().name(),
               c.spec().models_size());
  std::string id = c.id();
  order_.push_back(id);
  runs_[id] = std::move(run);
  wake_ = true;
  UpdateCampaignMetrics();
  notifier_.Changed(id);
  return View(runs_[id]);
}

absl::StatusOr<std::map<std::string, ModelState>> CampaignManager::FitPriors(
    const crest::v1::CampaignSpec& spec, std::vector<std::string>* warnings) {
  std::map<std::string, ModelState> states;
  const std::string& prior = spec.search().prior();
  if (prior.empty()) return states;
  StoredCampaign stored;
  {
    absl::MutexLock lock(&mu_);
    auto it = runs_.find(prior);
    if (it == runs_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("search.prior: no campaign '", prior, "' to learn from"));
    }
    if (!IsFinal(it->second.stored.campaign.state())) {
      return absl::FailedPreconditionError(
          absl::StrCat("search.prior: campaign ", prior,
                       " has not ended; its runs may still change, so learn from it once it has"));
    }
    stored = it->second.stored;
  }
  // The fits play virtual-time benchmarks: outside the lock.
  absl::StatusOr<std::string> share = PriorShareDir(options_);
  if (!share.ok()) return share.status();
  const nlohmann::json report = ReportToJson(BuildReport(stored));
  std::vector<std::string> cold;
  for (const auto& model : spec.models()) {
    absl::StatusOr<PriorFit> fit = FitPrior(report, stored.campaign.spec(), model, *share);
    if (!fit.ok()) {
      cold.push_back(absl::StrCat(model.name(), ": ", fit.status().message()));
      continue;
    }
    ModelState& ms = states[model.name()];
    ms.prior_profile = std::move(fit->profile_json);
    ms.prior_source = std::move(fit->source);
    ms.prior_block_num = fit->npu_block_num;
    spdlog::info("search.prior {}: model {} warm-starts from {}", prior, model.name(),
                 ms.prior_source);
  }
  if (states.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("search.prior: campaign ", prior,
                                                   " cannot warm-start any model (",
                                                   absl::StrJoin(cold, "; "), ")"));
  }
  for (const std::string& why : cold) {
    warnings->push_back(absl::StrCat("search.prior ", prior, " cannot warm-start ", why,
                                     "; its search starts cold"));
  }
  return states;
}

void CampaignManager::PredictFromPrior(Run& run, const std::string& model) {
  const auto& spec = run.stored.campaign.spec();
  ModelState ms = run.stored.models[model];
  if (ms.prior_profile.empty() || ms.prior_peak > 0 || !ms.prior_note.empty()) return;
  if (NeedsBlockNum(spec.search()) && ms.npu_block_num == 0) return;
  const SearchSpace space = SearchSpaceFor(spec, ms.npu_block_num);
  absl::StatusOr<std::string> share = PriorShareDir(options_);
  // This campaign's daemon's capacity when it reported one, else the prior's.
  const int64_t blocks = ms.npu_block_num > 0 ? ms.npu_block_num : ms.prior_block_num;
  absl::StatusOr<PriorPrediction> peak =
      share.ok() ? PredictPeak(ms.prior_profile, spec, blocks, space.lo, space.hi, *share)
                 : absl::StatusOr<PriorPrediction>(share.status());
  if (peak.ok() && peak->peak > 0) {
    ms.prior_peak = peak->peak;
    ms.prior_curve = std::move(peak->curve);
    spdlog::info("campaign {} model {}: {} predicts the peak at maxBatchSize {} (npuBlockNum {})",
                 run.stored.campaign.id(), model, ms.prior_source, ms.prior_peak, blocks);
  } else {
    ms.prior_note = absl::StrCat(
        "search.prior: ", ms.prior_source, " predicts no peak for this campaign (",
        peak.ok() ? "an empty curve" : peak.status().message(), "); the search started cold");
    spdlog::warn("campaign {} model {}: {}", run.stored.campaign.id(), model, ms.prior_note);
  }
  if (SetModelState(run, model, ms)) notifier_.Changed(run.stored.campaign.id());
}

absl::StatusOr<Campaign> CampaignManager::Get(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = runs_.find(id);
  if (it == runs_.end()) return absl::NotFoundError(absl::StrCat("no campaign '", id, "'"));
  return View(it->second);
}

std::vector<Campaign> CampaignManager::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<Campaign> out;
  out.reserve(order_.size());
  for (const auto& id : order_) out.push_back(View(runs_.at(id)));
  return out;
}

absl::StatusOr<crest::v1::CampaignReport> CampaignManager::Report(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = runs_.find(id);
  if (it == runs_.end()) return absl::NotFoundError(absl::StrCat("no campaign '", id, "'"));
  return BuildReport(it->second.stored);
}

absl::StatusOr<Campaign> CampaignManager::Cancel(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = runs_.find(id);
  if (it == runs_.end()) return absl::NotFoundError(absl::StrCat("no campaign '", id, "'"));
  if (!writer_.error().ok()) return writer_.Refusal();
  Run& run = it->second;
  if (IsFinal(run.stored.campaign.state()) || run.stored.campaign.cancel_requested()) {
    return View(run);
  }
  Batch batch;
  batch.campaigns.push_back(run.stored.campaign);
  batch.campaigns.back().set_cancel_requested(true);
  batch.campaigns.back().set_reason("cancelled by request");
  CREST_RETURN_IF_ERROR(Persist(batch, id, "the cancel request"));
  run.stored.campaign.set_cancel_requested(true);
  run.stored.campaign.set_reason("cancelled by request");
  spdlog::info("campaign {}: cancel requested; stopping its trials", id);
  jobs_.Stop(id, StopReason::kCampaignCancelled);
  wake_ = true;
  notifier_.Changed(id);
  return View(run);
}

int CampaignManager::Subscribe(std::function<void(const Campaign&)> cb) {
  return notifier_.Subscribe(std::move(cb));
}

void CampaignManager::Unsubscribe(int id) { notifier_.Unsubscribe(id); }

void CampaignManager::Poke() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

void CampaignManager::UpdateCampaignMetrics() {
  if (metrics_ == nullptr) return;
  std::vector<Campaign> campaigns;
  for (const auto& [id, run] : runs_) campaigns.push_back(run.stored.campaign);
  metrics_->SetCampaigns(campaigns);
}

Campaign CampaignManager::View(const Run& run) const {
  Campaign c = CampaignView(run.stored, jobs_.Of(run.stored.campaign.id()), run.progress,
                            writer_.error().ok() ? "" : writer_.Refusal().message());
  for (auto& mp : *c.mutable_models()) {
    auto drain = draining_.find(absl::StrCat(c.id(), "/", mp.model()));
    if (drain != draining_.end() && !mp.done() && jobs_.Count(c.id(), mp.model()) == 0) {
      mp.set_activity(absl::StrCat("exclusive: waiting for node ", drain->second,
                                   " to drain (no new job starts there meanwhile)"));
    }
  }
  return c;
}

void CampaignManager::Loop() {
  while (true) {
    std::vector<std::unique_ptr<JobTable::Job>> finished;
    absl::Status to_report;
    {
      absl::MutexLock lock(&mu_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return wake_ || stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&woken), options_.tick);
      if (stopping_) return;
      wake_ = false;
    }
    // Outside the lock: the registry calls Poke() when it changes.
    registry_->CheckLiveness();
    {
      absl::MutexLock lock(&mu_);
      finished = jobs_.Take(/*all=*/false);
      SchedulePass();
      if (!writer_.error().ok() && !persistence_error_reported_) {
        persistence_error_reported_ = true;
        to_report = writer_.error();
      }
    }
    JobTable::Join(std::move(finished));
    if (!to_report.ok() && on_persistence_error_) on_persistence_error_(to_report);
    if (metrics_ != nullptr) metrics_->SetAgentCounts(registry_->List());
  }
}

void CampaignManager::SchedulePass() {
  // A job on a node that got lost is stopped; its trial gets re-run elsewhere.
  jobs_.StopLost([this](const std::string& node) { return registry_->IsReady(node); });
  ResetReturnedNodes();
  // A drain ends with its model's search or its campaign.
  std::erase_if(draining_, [&](const auto& entry) {
    const std::string campaign = entry.first.substr(0, entry.first.find('/'));
    auto it = runs_.find(campaign);
    return it == runs_.end() || IsFinal(it->second.stored.campaign.state()) ||
           it->second.finishing || it->second.stored.campaign.cancel_requested();
  });
  for (const auto& id : order_) {
    if (!writer_.error().ok()) return;  // nothing new until a restart
    Run& run = runs_.at(id);
    if (IsFinal(run.stored.campaign.state()) || run.finishing) continue;
    ScheduleCampaign(run);
  }
}

void CampaignManager::ScheduleCampaign(Run& run) {
  const Campaign& c = run.stored.campaign;
  if (c.cancel_requested()) {
    MaybeFinish(run);
    return;
  }
  std::set<std::string> busy;  // nodes given a job in this pass
  bool all_done = true;
  for (int i = 0; i < c.spec().models_size(); ++i) {
    all_done = ScheduleModel(run, i, busy) && all_done;
  }
  if (all_done) MaybeFinish(run);
}

bool CampaignManager::SetModelState(Run& run, const std::string& model, const ModelState& state) {
  const std::string& id = run.stored.campaign.id();
  Batch batch;
  batch.models.push_back({{id, model}, state});
  if (!Persist(batch, id, absl::StrCat("the search state of model ", model)).ok()) return false;
  run.stored.models[model] = state;
  return true;
}

bool CampaignManager::ScheduleModel(Run& run, int model_index, std::set<std::string>& busy) {
  const auto& spec = run.stored.campaign.spec();
  const auto& model = spec.models(model_index);
  const std::string& id = run.stored.campaign.id();
  const ModelState& ms = run.stored.models[model.name()];
  const int running = jobs_.Count(id, model.name());
  const std::string key = absl::StrCat(id, "/", model.name());
  if (ms.done) {
    draining_.erase(key);
    return running == 0;
  }
  const std::vector<crest::v1::AgentInfo> agents = registry_->List();
  auto unavailable = [&](const std::string& node) {
    if (returning_.count(node) != 0 || resetting_.count(node) != 0 || jobs_.NodeHeldWhole(node)) {
      return true;
    }
    for (const auto& [waiting, drained] : draining_) {
      if (drained == node && waiting != key) return true;
    }
    return false;
  };
  std::vector<std::string> nodes =
      FreeEligibleNodes(model, agents, [&](const std::string& node_slot) {
        const std::string node = ParseNodeSlot(node_slot).node;
        return busy.count(node_slot) != 0 || jobs_.Busy(node_slot) || unavailable(node) ||
               (model.exclusive() && jobs_.NodeBusy(node));
      });
  if (model.exclusive()) {
    // A whole node per job: one slot of each.
    std::set<std::string> seen;
    std::erase_if(nodes,
                  [&](const std::string& p) { return !seen.insert(ParseNodeSlot(p).node).second; });
    if (nodes.empty() && running == 0 && draining_.count(key) == 0) {
      // Nothing runs and no node is free of jobs: drain the first eligible
      // node, and keep it until the model's search ends, so that another
      // model does not take it between two of this model's jobs.
      for (const auto& node_slot :
           FreeEligibleNodes(model, agents, [](const std::string&) { return false; })) {
        const std::string node = ParseNodeSlot(node_slot).node;
        if (unavailable(node)) continue;
        draining_[key] = node;
        notifier_.Changed(id);
        spdlog::info(
            "campaign {} model {}: exclusive: waiting for node {} to drain; no new job "
            "starts there meanwhile",
            id, model.name(), node);
        break;
      }
    }
  }
  // A daemon that cannot start at its own defaults on a node will not start
  // there for a search: that node sits out the model's search. One node's
  // failure (a port taken, a broken card) leaves the model's other nodes to
  // try, within limits.max_retries.
  const std::map<std::string, std::string>& failed = probe_failed_on_[key];
  std::erase_if(nodes,
                [&](const std::string& n) { return failed.count(ParseNodeSlot(n).node) != 0; });
  if (NeedsBlockNum(spec.search()) && ms.npu_block_num == 0) {
    std::vector<std::string> eligible =
        FreeEligibleNodes(model, agents, [](const std::string&) { return false; });
    const bool all_failed =
        !failed.empty() && !eligible.empty() &&
        std::all_of(eligible.begin(), eligible.end(),
                    [&](const std::string& n) { return failed.count(ParseNodeSlot(n).node) != 0; });
    if (all_failed && running == 0) {
      std::vector<std::string> why;
      why.reserve(failed.size());
      for (const auto& [node, reason] : failed) why.push_back(absl::StrCat(node, ": ", reason));
      ModelState done = ms;
      done.done = true;
      done.done_reason = absl::StrCat(failed.size() == 1 ? "the daemon failed to start on "
                                                         : "the daemon failed to start on every "
                                                           "node of the model (",
                                      absl::StrJoin(why, "; "), failed.size() == 1 ? "" : ")");
      if (SetModelState(run, model.name(), done)) {
        spdlog::info("campaign {} model {}: search done: {}", id, model.name(), done.done_reason);
        notifier_.Changed(id);
      }
      return ms.done;
    }
  }
  PredictFromPrior(run, model.name());
  // A fleet's nodes: the ready eligible ones, busy or not.
  std::vector<std::string> fleet;
  if (model.fleet()) {
    for (const auto& node_slot :
         FreeEligibleNodes(model, agents, [](const std::string&) { return false; })) {
      const std::string node = ParseNodeSlot(node_slot).node;
      if (std::find(fleet.begin(), fleet.end(), node) == fleet.end()) fleet.push_back(node);
    }
  }
  ModelPlan plan = PlanModel(spec, model, ms, run.stored.trials,
                             *ModelStrategy(spec.search().strategy(), ms), running, nodes.size(),
                             probe_failures_[key], EligibleNodeSlots(model, agents), fleet);
  if (plan.done_reason) {
    ModelState done = ms;
    done.done = true;
    done.done_reason = *plan.done_reason;
    if (SetModelState(run, model.name(), done)) {
      spdlog::info("campaign {} model {}: search done: {}", id, model.name(), done.done_reason);
      notifier_.Changed(id);
    }
  }
  if (plan.probe) {
    LaunchProbe(run, model.name(), nodes.front());
    busy.insert(nodes.front());
  }
  // A point goes only to an agent that accepts its values (spec_limits.h).
  std::vector<std::string> assigned = AssignNodes(spec, plan.trials, nodes, agents);
  for (size_t i = 0; i < plan.trials.size(); ++i) {
    if (assigned[i].empty()) continue;
    busy.insert(assigned[i]);
    LaunchTrial(
        run, StartedTrial(plan.trials[i], id, model.name(), assigned[i], run.next_trial++, Now()));
  }
  return plan.finished;
}

void CampaignManager::MaybeFinish(Run& run) {
  const std::string& id = run.stored.campaign.id();
  // Its trials stop first; and a failed store keeps everything as it is.
  if (jobs_.Count(id) == 0 && writer_.error().ok()) RestoreHosts(id, /*finish=*/true);
}

}  // namespace crest::controller
