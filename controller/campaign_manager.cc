#include "controller/campaign_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/time_util.h"

#include "common/mindie_limits.h"
#include "common/status.h"
#include "controller/kv_blocks.h"
#include "controller/spec_validator.h"

namespace crest::controller {
namespace {

using crest::v1::Campaign;
using crest::v1::Trial;
using crest::v1::TrialStatus;
using google::protobuf::util::TimeUtil;

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

bool IsFinalCampaign(crest::v1::CampaignState s) {
  return s == crest::v1::CAMPAIGN_SUCCEEDED || s == crest::v1::CAMPAIGN_FAILED ||
         s == crest::v1::CAMPAIGN_CANCELLED;
}

// What the trials of one (point, repeat) came to so far.
struct Slot {
  int attempts = 0;
  bool ok = false;
  bool running = false;
  bool infeasible = false;
  bool failed = false;
  double speed = 0;
  std::string reason;
};

// (maxBatchSize, repeat) -> slot, for the search trials (or only the
// calibration trials) of `model`. Slots whose retries are used up count failed.
std::map<std::pair<int64_t, uint32_t>, Slot> Slots(const std::vector<Trial>& trials,
                                                   const std::string& model, bool calibration,
                                                   int max_attempts) {
  std::map<std::pair<int64_t, uint32_t>, Slot> slots;
  for (const auto& t : trials) {
    if (t.model() != model || t.calibration() != calibration) continue;
    Slot& s = slots[{t.parameters().max_batch_size(), t.repeat()}];
    ++s.attempts;
    switch (t.status()) {
      case crest::v1::TRIAL_OK:
        s.ok = true;
        s.speed = t.result().generate_speed();
        break;
      case crest::v1::TRIAL_RUNNING:
      case crest::v1::TRIAL_PENDING:
        s.running = true;
        break;
      case crest::v1::TRIAL_INFEASIBLE:
        s.infeasible = true;
        s.reason = t.reason();
        break;
      case crest::v1::TRIAL_FAILED:
      case crest::v1::TRIAL_CANCELLED:
        s.failed = true;
        s.reason = t.reason();
        break;
      default:  // interrupted: re-run while attempts remain
        s.reason = t.reason();
        break;
    }
  }
  for (auto& [key, s] : slots) {
    if (!s.ok && !s.running && !s.infeasible && !s.failed && s.attempts >= max_attempts) {
      s.failed = true;
      s.reason = absl::StrCat("interrupted ", s.attempts, " times (last: ", s.reason, ")");
    }
  }
  return slots;
}

std::map<int64_t, PointOutcome> FinishedPoints(
    const std::map<std::pair<int64_t, uint32_t>, Slot>& slots, uint32_t repeats) {
  std::map<int64_t, std::vector<const Slot*>> by_point;
  for (const auto& [key, s] : slots) by_point[key.first].push_back(&s);
  std::map<int64_t, PointOutcome> out;
  for (const auto& [point, list] : by_point) {
    PointOutcome o;
    bool any_infeasible = false;
    bool any_failed = false;
    uint32_t ok = 0;
    double sum = 0;
    for (const Slot* s : list) {
      any_infeasible |= s->infeasible;
      any_failed |= s->failed;
      if ((s->infeasible || s->failed) && o.reason.empty()) o.reason = s->reason;
      if (s->ok) {
        ++ok;
        sum += s->speed;
      }
    }
    if (any_infeasible) {
      o.kind = PointOutcome::Kind::kInfeasible;
    } else if (any_failed) {
      o.kind = PointOutcome::Kind::kFailed;
    } else if (ok >= repeats) {
      o.objective = sum / ok;
    } else {
      continue;  // unfinished
    }
    out[point] = o;
  }
  return out;
}

bool Matches(const crest::v1::ModelSpec& model, const crest::v1::AgentInfo& agent) {
  if (!model.nodes().empty()) {
    return std::find(model.nodes().begin(), model.nodes().end(), agent.node_name()) !=
           model.nodes().end();
  }
  for (const auto& [k, v] : model.selector()) {
    auto it = agent.labels().find(k);
    if (it == agent.labels().end() || it->second != v) return false;
  }
  return true;
}

// The select-batch times in config.json are whole milliseconds within
// MindIE's range (the agent refuses others). Under a max-throughput load the
// measured first-token time often exceeds a second because it includes
// queueing; it is capped rather than failing every later trial.
double SelectBatchTimeMs(double measured_ms) {
  return std::clamp(std::round(measured_ms), 1.0, static_cast<double>(kMaxSelectBatchTimeMs));
}

const Trial* CalibrationTrial(const std::vector<Trial>& trials, const std::string& model) {
  for (const auto& t : trials) {
    if (t.model() == model && t.calibration() && t.status() == crest::v1::TRIAL_OK) return &t;
  }
  return nullptr;
}

}  // namespace

std::optional<crest::v1::BestConfig> BestOf(const std::vector<Trial>& trials,
                                            const std::string& model) {
  std::map<int64_t, std::vector<const Trial*>> by_point;
  for (const auto& t : trials) {
    if (t.model() == model && !t.calibration() && t.status() == crest::v1::TRIAL_OK) {
      by_point[t.parameters().max_batch_size()].push_back(&t);
    }
  }
  std::optional<crest::v1::BestConfig> best;
  for (const auto& [point, list] : by_point) {
    double speed = 0;
    double per_client = 0;
    for (const Trial* t : list) {
      speed += t->result().generate_speed();
      per_client += t->result().generate_speed_per_client();
    }
    speed /= static_cast<double>(list.size());
    per_client /= static_cast<double>(list.size());
    if (!best || speed > best->generate_speed()) {
      best.emplace();
      *best->mutable_parameters() = list.front()->parameters();
      best->set_generate_speed(speed);
      best->set_generate_speed_per_client(per_client);
    }
  }
  return best;
}

void NormalizeTimeScale(crest::v1::BenchmarkResult* r, double scale) {
  if (scale <= 0 || scale == 1) return;
  r->set_generate_speed(r->generate_speed() / scale);
  r->set_generate_speed_per_client(r->generate_speed_per_client() / scale);
  r->set_total_generate_speed(r->total_generate_speed() / scale);
  r->set_input_generate_speed(r->input_generate_speed() / scale);
  r->set_qps(r->qps() / scale);
  for (auto* stats :
       {r->mutable_first_token_time(), r->mutable_decode_time(), r->mutable_e2e_latency()}) {
    stats->set_average_ms(stats->average_ms() * scale);
    stats->set_p50_ms(stats->p50_ms() * scale);
    stats->set_p90_ms(stats->p90_ms() * scale);
    stats->set_p99_ms(stats->p99_ms() * scale);
    stats->set_max_ms(stats->max_ms() * scale);
    stats->set_min_ms(stats->min_ms() * scale);
  }
  auto nanos = static_cast<int64_t>(
      (static_cast<double>(r->duration().seconds()) * 1e9 + r->duration().nanos()) * scale);
  r->mutable_duration()->set_seconds(nanos / 1000000000);
  r->mutable_duration()->set_nanos(static_cast<int32_t>(nanos % 1000000000));
}

crest::v1::CampaignReport BuildReport(const StoredCampaign& stored) {
  crest::v1::CampaignReport report;
  report.set_id(stored.campaign.id());
  report.set_name(stored.campaign.spec().name());
  report.set_state(stored.campaign.state());
  for (const auto& m : stored.campaign.spec().models()) {
    auto* mr = report.add_models();
    mr->set_model(m.name());
    if (auto best = BestOf(stored.trials, m.name())) *mr->mutable_best() = *best;
    for (const auto& t : stored.trials) {
      if (t.model() == m.name()) *mr->add_trials() = t;
    }
  }
  return report;
}

CampaignManager::CampaignManager(Store* store, AgentRegistry* registry, AgentConnector* connector,
                                 const Clock* clock, Metrics* metrics, ManagerOptions options)
    : store_(store),
      registry_(registry),
      connector_(connector),
      clock_(clock),
      metrics_(metrics),
      options_(options) {}

CampaignManager::~CampaignManager() { Shutdown(); }

google::protobuf::Timestamp CampaignManager::Now() const {
  return TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(clock_->Now()));
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
      auto strategy = MakeStrategy(run.stored.campaign.spec().search().strategy());
      run.strategy = strategy.ok() ? std::move(*strategy) : std::make_unique<StepSearch>();
      for (auto& t : run.stored.trials) {
        run.next_trial =
            std::max<int64_t>(run.next_trial, std::stoll(t.id().substr(t.id().rfind('t') + 1)) + 1);
        if (!IsFinal(t.status())) {
          // It was running when the controller died: never trust a result
          // that was not recorded; the scheduler re-runs it.
          t.set_status(crest::v1::TRIAL_INTERRUPTED);
          t.set_reason("controller restarted while the trial ran");
          *t.mutable_finished() = Now();
          batch.trials.push_back(t);
        }
      }
      const std::string id = run.stored.campaign.id();
      if (IsFinalCampaign(run.stored.campaign.state())) {
        for (const auto& n : run.stored.tuned) {
          if (run.stored.restored.count(n) == 0) {
            to_restore.push_back(id);
            break;
          }
        }
      } else {
        spdlog::info("resuming campaign {} ({} trials recorded)", id, run.stored.trials.size());
      }
      order_.push_back(id);
      runs_[id] = std::move(run);
    }
    CREST_RETURN_IF_ERROR(Persist(batch));
    for (const auto& t : batch.trials) {
      if (metrics_ != nullptr) metrics_->RecordTrial(t);
    }
    for (const auto& id : to_restore) {
      runs_[id].finishing = true;
      restorers_.emplace_back([this, id] { RestoreHosts(id, /*finish=*/false); });
    }
    UpdateCampaignMetrics();
    started_ = true;
    wake_ = true;
  }
  loop_ = std::thread([this] { Loop(); });
  prober_ = std::thread([this] { ProbeLoop(); });
  notifier_ = std::thread([this] { NotifierLoop(); });
  return absl::OkStatus();
}

void CampaignManager::Shutdown() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [node, job] : jobs_) {
      job->stop_reason = StopReason::kShutdown;
      job->cancel.Cancel();
    }
  }
  if (loop_.joinable()) loop_.join();
  if (prober_.joinable()) prober_.join();
  {
    absl::MutexLock lock(&mu_);
    for (auto& [node, job] : jobs_) threads.push_back(std::move(job->thread));
    for (auto& t : restorers_) threads.push_back(std::move(t));
    restorers_.clear();
  }
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
  {
    absl::MutexLock lock(&mu_);
    jobs_.clear();
  }
  if (notifier_.joinable()) notifier_.join();
}

absl::Status CampaignManager::Persist(const Batch& batch) {
  absl::Status s = store_->Apply(batch);
  if (!s.ok()) spdlog::error("cannot record state: {}", s.ToString());
  return s;
}

absl::StatusOr<Campaign> CampaignManager::Create(crest::v1::CampaignSpec spec) {
  ApplySpecDefaults(&spec);
  CREST_RETURN_IF_ERROR(CheckCampaignSpec(spec));
  CREST_ASSIGN_OR_RETURN(auto strategy, MakeStrategy(spec.search().strategy()));
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the controller is shutting down");
  CREST_ASSIGN_OR_RETURN(int64_t number, store_->NextCampaignNumber());
  Run run;
  run.strategy = std::move(strategy);
  Campaign& c = run.stored.campaign;
  c.set_id(absl::StrCat("c", number));
  *c.mutable_spec() = std::move(spec);
  c.set_state(crest::v1::CAMPAIGN_PENDING);
  *c.mutable_created() = Now();
  Batch batch;
  batch.campaigns.push_back(c);
  CREST_RETURN_IF_ERROR(Annotate(Persist(batch), "recording the campaign"));
  spdlog::info("campaign {} '{}' created with {} models", c.id(), c.spec().name(),
               c.spec().models_size());
  std::string id = c.id();
  order_.push_back(id);
  runs_[id] = std::move(run);
  wake_ = true;
  UpdateCampaignMetrics();
  NotifyLocked(id);
  return View(runs_[id]);
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
  Run& run = it->second;
  Campaign& c = run.stored.campaign;
  if (IsFinalCampaign(c.state()) || c.cancel_requested()) return View(run);
  c.set_cancel_requested(true);
  c.set_reason("cancelled by request");
  Batch batch;
  batch.campaigns.push_back(c);
  CREST_RETURN_IF_ERROR(Persist(batch));
  spdlog::info("campaign {}: cancel requested; stopping its trials", id);
  for (auto& [node, job] : jobs_) {
    if (job->campaign == id) {
      job->stop_reason = StopReason::kCampaignCancelled;
      job->cancel.Cancel();
    }
  }
  wake_ = true;
  NotifyLocked(id);
  return View(run);
}

int CampaignManager::Subscribe(std::function<void(const Campaign&)> cb) {
  absl::MutexLock lock(&subscribers_mu_);
  subscribers_[next_subscriber_] = std::move(cb);
  return next_subscriber_++;
}

void CampaignManager::Unsubscribe(int id) {
  absl::MutexLock lock(&subscribers_mu_);
  subscribers_.erase(id);
}

void CampaignManager::Poke() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

void CampaignManager::NotifyLocked(const std::string& campaign_id) {
  pending_notify_.insert(campaign_id);
}

void CampaignManager::NotifierLoop() {
  while (true) {
    std::vector<Campaign> views;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !pending_notify_.empty() || (stopping_ && jobs_.empty());
      };
      mu_.Await(absl::Condition(&ready));
      if (pending_notify_.empty()) return;
      for (const auto& id : pending_notify_) {
        auto it = runs_.find(id);
        if (it != runs_.end()) views.push_back(View(it->second));
      }
      pending_notify_.clear();
    }
    absl::MutexLock lock(&subscribers_mu_);
    for (const auto& c : views) {
      for (auto& [id, cb] : subscribers_) cb(c);
    }
  }
}

void CampaignManager::UpdateCampaignMetrics() {
  if (metrics_ == nullptr) return;
  std::map<crest::v1::CampaignState, int> counts;
  for (const auto& [id, run] : runs_) ++counts[run.stored.campaign.state()];
  metrics_->SetCampaignCounts(counts);
}

void CampaignManager::Loop() {
  while (true) {
    std::vector<std::unique_ptr<Job>> finished;
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
      for (auto it = jobs_.begin(); it != jobs_.end();) {
        if (it->second->finished) {
          finished.push_back(std::move(it->second));
          it = jobs_.erase(it);
        } else {
          ++it;
        }
      }
      SchedulePass();
    }
    for (auto& job : finished) {
      if (job->thread.joinable()) job->thread.join();
    }
    if (metrics_ != nullptr) {
      int ready = 0;
      int lost = 0;
      for (const auto& a : registry_->List()) {
        (a.state() == crest::v1::AGENT_READY ? ready : lost)++;
      }
      metrics_->SetAgentCounts(ready, lost);
    }
  }
}

void CampaignManager::ProbeLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stop), options_.probe_interval)) return;
    }
    for (const auto& agent : registry_->List()) {
      if (!agent.static_()) continue;
      auto client = connector_->Connect(agent.node_name(), agent.address());
      auto info = client->GetNodeInfo(std::min(options_.call_timeout, absl::Seconds(3)));
      if (info.ok()) {
        std::map<std::string, std::string> labels(info->labels().begin(), info->labels().end());
        registry_->MarkSeen(agent.node_name(), &labels);
      }
    }
  }
}

void CampaignManager::SchedulePass() {
  // A job on a node that got lost is stopped; its trial gets re-run elsewhere.
  for (auto& [node, job] : jobs_) {
    if (!job->finished && job->stop_reason == StopReason::kNone && !registry_->IsReady(node)) {
      job->stop_reason = StopReason::kNodeLost;
      job->cancel.Cancel();
    }
  }
  for (const auto& id : order_) {
    Run& run = runs_.at(id);
    if (IsFinalCampaign(run.stored.campaign.state()) || run.finishing) continue;
    ScheduleCampaign(run);
  }
}

std::vector<std::string> CampaignManager::FreeEligibleNodes(
    const crest::v1::ModelSpec& model, const std::set<std::string>& busy) const {
  std::vector<std::string> out;
  auto agents = registry_->List();
  auto usable = [&](const crest::v1::AgentInfo& a) {
    return a.state() == crest::v1::AGENT_READY && busy.count(a.node_name()) == 0 &&
           jobs_.count(a.node_name()) == 0 && Matches(model, a);
  };
  if (!model.nodes().empty()) {
    for (const auto& name : model.nodes()) {  // in the order listed
      for (const auto& a : agents) {
        if (a.node_name() == name && usable(a)) out.push_back(name);
      }
    }
    return out;
  }
  for (const auto& a : agents) {
    if (usable(a)) out.push_back(a.node_name());
  }
  return out;
}

void CampaignManager::ScheduleCampaign(Run& run) {
  const Campaign& c = run.stored.campaign;
  if (c.cancel_requested()) {
    MaybeFinish(run);
    return;
  }
  std::set<std::string> busy;
  for (const auto& [node, job] : jobs_) busy.insert(node);
  bool all_done = true;
  for (int i = 0; i < c.spec().models_size(); ++i) {
    all_done = ScheduleModel(run, i, busy) && all_done;
  }
  if (all_done) MaybeFinish(run);
}

crest::v1::TrialParameters CampaignManager::ParametersFor(const Run& run, int model_index,
                                                          int64_t point, bool calibration) const {
  const auto& spec = run.stored.campaign.spec();
  crest::v1::TrialParameters p;
  p.set_max_batch_size(point);
  p.set_max_prefill_batch_size(std::max<int64_t>(1, point / 2));
  if (spec.calibrate() && !calibration) {
    if (const Trial* cal = CalibrationTrial(run.stored.trials, spec.models(model_index).name())) {
      p.set_support_select_batch(true);
      p.set_prefill_time_ms_per_req(
          SelectBatchTimeMs(cal->result().first_token_time().average_ms()));
      p.set_decode_time_ms_per_req(SelectBatchTimeMs(cal->result().decode_time().average_ms()));
    }
  }
  if (spec.client().mode() == crest::v1::CLIENT_MODE_RATE) {
    p.set_concurrency(spec.client().concurrency());
  } else {
    p.set_concurrency(static_cast<uint32_t>(std::max<int64_t>(1, point - 1)));
  }
  return p;
}

bool CampaignManager::ScheduleModel(Run& run, int model_index, std::set<std::string>& busy) {
  const auto& spec = run.stored.campaign.spec();
  const auto& model = spec.models(model_index);
  const std::string& id = run.stored.campaign.id();
  ModelState& ms = run.stored.models[model.name()];
  int running = 0;
  for (const auto& [node, job] : jobs_) {
    if (job->campaign == id && job->model == model.name()) ++running;
  }
  if (ms.done) return running == 0;
  auto mark_done = [&](const std::string& reason) {
    ms.done = true;
    ms.done_reason = reason;
    Batch batch;
    batch.models.push_back({{id, model.name()}, ms});
    Persist(batch).IgnoreError();
    spdlog::info("campaign {} model {}: search done: {}", id, model.name(), reason);
    NotifyLocked(id);
  };
  std::vector<std::string> nodes = FreeEligibleNodes(model, busy);
  const uint32_t parallel = std::max<uint32_t>(1, model.parallel());
  if (NeedsBlockNum(spec.search()) && ms.npu_block_num == 0) {
    std::string key = absl::StrCat(id, "/", model.name());
    if (probe_failures_[key] > static_cast<int>(spec.limits().max_retries())) {
      mark_done("could not read npuBlockNum: every probe start failed");
      return running == 0;
    }
    if (running == 0 && !nodes.empty()) {
      LaunchProbe(run, model.name(), nodes.front());
      busy.insert(nodes.front());
    }
    return false;
  }
  SearchBounds bounds = DeriveBounds(spec, ms.npu_block_num);
  const int max_attempts = 1 + static_cast<int>(spec.limits().max_retries());
  auto launch = [&](int64_t point, uint32_t repeat, bool calibration, int attempt) {
    if (running >= static_cast<int>(parallel) || nodes.empty()) return;
    Trial t;
    t.set_id(absl::StrCat(id, "-t", run.next_trial++));
    t.set_campaign_id(id);
    t.set_model(model.name());
    t.set_node(nodes.front());
    *t.mutable_parameters() = ParametersFor(run, model_index, point, calibration);
    t.set_status(crest::v1::TRIAL_RUNNING);
    t.set_attempt(static_cast<uint32_t>(attempt));
    t.set_repeat(repeat);
    t.set_calibration(calibration);
    *t.mutable_started() = Now();
    busy.insert(nodes.front());
    nodes.erase(nodes.begin());
    ++running;
    LaunchTrial(run, std::move(t));
  };
  if (spec.calibrate()) {
    auto slots = Slots(run.stored.trials, model.name(), /*calibration=*/true, max_attempts);
    Slot slot;
    if (!slots.empty()) slot = slots.begin()->second;
    if (!slot.ok) {
      if (slot.infeasible || slot.failed) {
        mark_done(
            absl::StrCat("calibration at maxBatchSize ", bounds.initial, " failed: ", slot.reason));
        return running == 0;
      }
      if (!slot.running) launch(bounds.initial, 0, true, slot.attempts + 1);
      return false;
    }
  }
  SearchSpace space{bounds.lo,
                    bounds.hi,
                    bounds.initial,
                    spec.search().step(),
                    spec.search().tolerance(),
                    spec.search().max_trials()};
  auto slots = Slots(run.stored.trials, model.name(), /*calibration=*/false, max_attempts);
  auto finished = FinishedPoints(slots, spec.search().repeats());
  SearchDecision decision = run.strategy->Decide(space, finished, parallel);
  if (decision.done) {
    if (running == 0) mark_done(decision.reason);
    return running == 0;
  }
  for (int64_t point : decision.wanted) {
    for (uint32_t r = 0; r < spec.search().repeats(); ++r) {
      auto it = slots.find({point, r});
      Slot slot = it == slots.end() ? Slot{} : it->second;
      if (slot.ok || slot.running || slot.infeasible || slot.failed) continue;
      launch(point, r, false, slot.attempts + 1);
    }
  }
  return false;
}

void CampaignManager::MaybeFinish(Run& run) {
  Campaign& c = run.stored.campaign;
  for (const auto& [node, job] : jobs_) {
    if (job->campaign == c.id()) return;  // wait for its trials to stop
  }
  run.finishing = true;
  const std::string id = c.id();
  restorers_.emplace_back([this, id] { RestoreHosts(id, /*finish=*/true); });
}

void CampaignManager::RestoreHosts(const std::string& campaign_id, bool finish) {
  std::vector<std::pair<std::string, std::string>> nodes;  // name, address
  {
    absl::MutexLock lock(&mu_);
    const Run& run = runs_.at(campaign_id);
    for (const auto& n : run.stored.tuned) {
      if (run.stored.restored.count(n) != 0) continue;
      // Another running campaign that tuned this node restores it at its end.
      bool shared = false;
      for (const auto& [other_id, other] : runs_) {
        if (other_id != campaign_id && !IsFinalCampaign(other.stored.campaign.state()) &&
            other.stored.tuned.count(n) != 0) {
          shared = true;
        }
      }
      if (shared) continue;
      auto agent = registry_->Get(n);
      nodes.emplace_back(n, agent ? agent->address() : "");
    }
  }
  std::vector<std::string> failed;
  for (const auto& [node, address] : nodes) {
    absl::Status s = absl::UnavailableError("address unknown");
    if (!address.empty()) {
      auto client = connector_->Connect(node, address);
      s = client->RestoreHostTuning(options_.call_timeout).status();
    }
    absl::MutexLock lock(&mu_);
    if (s.ok()) {
      spdlog::info("campaign {}: host settings of {} restored", campaign_id, node);
      runs_.at(campaign_id).stored.restored.insert(node);
      Batch batch;
      batch.restored.emplace_back(campaign_id, node);
      Persist(batch).IgnoreError();
    } else {
      spdlog::warn("campaign {}: could not restore host settings of {}: {}", campaign_id, node,
                   s.ToString());
      failed.push_back(node);
    }
  }
  absl::MutexLock lock(&mu_);
  Run& run = runs_.at(campaign_id);
  run.finishing = false;
  if (!finish) return;
  Campaign& c = run.stored.campaign;
  std::vector<std::string> unsolved;
  for (const auto& m : c.spec().models()) {
    if (!BestOf(run.stored.trials, m.name())) {
      unsolved.push_back(
          absl::StrCat(m.name(), " (", run.stored.models[m.name()].done_reason, ")"));
    }
  }
  if (c.cancel_requested()) {
    c.set_state(crest::v1::CAMPAIGN_CANCELLED);
  } else if (unsolved.empty()) {
    c.set_state(crest::v1::CAMPAIGN_SUCCEEDED);
  } else {
    c.set_state(crest::v1::CAMPAIGN_FAILED);
    c.set_reason(absl::StrCat("no ok trial for ", absl::StrJoin(unsolved, ", ")));
  }
  if (!failed.empty()) {
    c.set_reason(absl::StrCat(c.reason(), c.reason().empty() ? "" : "; ",
                              "host settings not restored on ", absl::StrJoin(failed, ", "),
                              " (retried at the next controller start)"));
  }
  *c.mutable_finished() = Now();
  Batch batch;
  batch.campaigns.push_back(c);
  Persist(batch).IgnoreError();
  spdlog::info("campaign {} ended: {}{}", campaign_id, crest::v1::CampaignState_Name(c.state()),
               c.reason().empty() ? "" : " (" + c.reason() + ")");
  UpdateCampaignMetrics();
  NotifyLocked(campaign_id);
}

void CampaignManager::LaunchProbe(Run& run, const std::string& model, const std::string& node) {
  auto job = std::make_unique<Job>();
  job->campaign = run.stored.campaign.id();
  job->model = model;
  job->node = node;
  Job* raw = job.get();
  if (run.stored.campaign.state() == crest::v1::CAMPAIGN_PENDING) {
    run.stored.campaign.set_state(crest::v1::CAMPAIGN_RUNNING);
    *run.stored.campaign.mutable_started() = Now();
    Batch batch;
    batch.campaigns.push_back(run.stored.campaign);
    Persist(batch).IgnoreError();
    UpdateCampaignMetrics();
  }
  spdlog::info("campaign {} model {}: starting the daemon on {} to read npuBlockNum", job->campaign,
               model, node);
  jobs_[node] = std::move(job);
  raw->thread = std::thread([this, raw] { RunProbe(raw); });
  NotifyLocked(run.stored.campaign.id());
}

void CampaignManager::LaunchTrial(Run& run, Trial trial) {
  Batch batch;
  if (run.stored.campaign.state() == crest::v1::CAMPAIGN_PENDING) {
    run.stored.campaign.set_state(crest::v1::CAMPAIGN_RUNNING);
    *run.stored.campaign.mutable_started() = Now();
    batch.campaigns.push_back(run.stored.campaign);
  }
  batch.trials.push_back(trial);
  if (!Persist(batch).ok()) return;
  UpdateCampaignMetrics();
  run.stored.trials.push_back(trial);
  auto job = std::make_unique<Job>();
  job->campaign = trial.campaign_id();
  job->model = trial.model();
  job->node = trial.node();
  job->trial_id = trial.id();
  Job* raw = job.get();
  spdlog::info("campaign {} model {}: trial {} maxBatchSize {} (repeat {}, attempt {}{}) on {}",
               trial.campaign_id(), trial.model(), trial.id(), trial.parameters().max_batch_size(),
               trial.repeat(), trial.attempt(), trial.calibration() ? ", calibration" : "",
               trial.node());
  registry_->SetRunningTrial(trial.node(), trial.id());
  jobs_[trial.node()] = std::move(job);
  raw->thread = std::thread([this, raw, trial] { RunTrial(raw, trial); });
  NotifyLocked(trial.campaign_id());
}

crest::v1::TrialStatus CampaignManager::Classify(Job* job, const absl::Status& status,
                                                 std::string* reason) {
  StopReason stop;
  {
    absl::MutexLock lock(&mu_);
    stop = job->stop_reason;
  }
  switch (stop) {
    case StopReason::kCampaignCancelled:
      *reason = "campaign cancelled";
      return crest::v1::TRIAL_CANCELLED;
    case StopReason::kShutdown:
      *reason = "controller shut down while the trial ran";
      return crest::v1::TRIAL_INTERRUPTED;
    case StopReason::kNodeLost:
      *reason = absl::StrCat("node ", job->node, " lost (missed heartbeats)");
      return crest::v1::TRIAL_INTERRUPTED;
    case StopReason::kNone:
      break;
  }
  if (status.code() == absl::StatusCode::kUnavailable ||
      status.code() == absl::StatusCode::kCancelled) {
    *reason = absl::StrCat("node ", job->node, " unreachable: ", status.message());
    registry_->MarkLost(job->node, std::string(status.message()));
    return crest::v1::TRIAL_INTERRUPTED;
  }
  *reason = std::string(status.message());
  return crest::v1::TRIAL_FAILED;
}

void CampaignManager::RunProbe(Job* job) {
  crest::v1::CampaignSpec spec;
  std::string address;
  {
    absl::MutexLock lock(&mu_);
    spec = runs_.at(job->campaign).stored.campaign.spec();
  }
  if (auto agent = registry_->Get(job->node)) address = agent->address();
  auto client = connector_->Connect(job->node, address);
  crest::v1::StartDaemonRequest req;
  *req.mutable_pinning() = spec.host().pin();
  req.set_replace_running(true);
  *req.mutable_start_timeout() = spec.limits().start_timeout();
  auto outcome = client->StartDaemon(
      req, FromProto(spec.limits().start_timeout()) + absl::Seconds(10), &job->cancel);
  if (outcome.ok()) client->StopDaemon(options_.call_timeout).IgnoreError();
  std::string reason;
  if (!outcome.ok()) Classify(job, outcome.status(), &reason);
  absl::MutexLock lock(&mu_);
  Run& run = runs_.at(job->campaign);
  ModelState& ms = run.stored.models[job->model];
  if (outcome.ok() && outcome->ready && outcome->ready_event.npu_block_num() > 0) {
    ms.npu_block_num = outcome->ready_event.npu_block_num();
    ms.probe_node = job->node;
    Batch batch;
    batch.models.push_back({{job->campaign, job->model}, ms});
    Persist(batch).IgnoreError();
    SearchBounds b = DeriveBounds(spec, ms.npu_block_num);
    spdlog::info(
        "campaign {} model {}: npuBlockNum {} on {} -> maxBatchSize range [{}, {}], start {}",
        job->campaign, job->model, ms.npu_block_num, job->node, b.lo, b.hi, b.initial);
  } else {
    ++probe_failures_[absl::StrCat(job->campaign, "/", job->model)];
    if (outcome.ok()) {
      reason =
          outcome->ready ? "the daemon reported no npuBlockNum" : outcome->failed_event.reason();
      if (!outcome->ready && job->stop_reason == StopReason::kNone) {
        // A daemon that cannot start at its own defaults will not start for a search.
        ms.done = true;
        ms.done_reason = absl::StrCat("the daemon failed to start on ", job->node, ": ", reason);
        Batch batch;
        batch.models.push_back({{job->campaign, job->model}, ms});
        Persist(batch).IgnoreError();
      }
    }
    spdlog::warn("campaign {} model {}: probe on {} failed: {}", job->campaign, job->model,
                 job->node, reason);
  }
  job->finished = true;
  wake_ = true;
  NotifyLocked(job->campaign);
}

void CampaignManager::RunTrial(Job* job, Trial trial) {
  crest::v1::CampaignSpec spec;
  bool tune = false;
  {
    absl::MutexLock lock(&mu_);
    Run& run = runs_.at(job->campaign);
    spec = run.stored.campaign.spec();
    bool wants = !spec.host().governor().empty() || !spec.host().thp().empty();
    if (wants && run.stored.tuned.count(job->node) == 0) {
      // Recorded before the change, so a crash in between still restores it.
      Batch batch;
      batch.tuned.emplace_back(job->campaign, job->node);
      tune = Persist(batch).ok();
      if (tune) run.stored.tuned.insert(job->node);
    }
  }
  std::string address;
  if (auto agent = registry_->Get(job->node)) address = agent->address();
  auto client = connector_->Connect(job->node, address);
  auto end = [&](TrialStatus status, const std::string& reason) {
    trial.set_status(status);
    trial.set_reason(reason);
    FinishTrial(job, std::move(trial));
  };
  auto end_error = [&](const absl::Status& s, const std::string& what) {
    std::string reason;
    TrialStatus status = Classify(job, s, &reason);
    if (status == crest::v1::TRIAL_FAILED) reason = absl::StrCat(what, ": ", reason);
    // A lost node is not waited for; everything else stops its daemon cleanly.
    if (status != crest::v1::TRIAL_INTERRUPTED || registry_->IsReady(job->node)) {
      client->StopDaemon(options_.call_timeout).IgnoreError();
    }
    end(status, reason);
  };
  if (tune) {
    crest::v1::ApplyHostTuningRequest req;
    req.set_governor(spec.host().governor());
    req.set_thp(spec.host().thp());
    auto reply = client->ApplyHostTuning(req, options_.call_timeout);
    if (!reply.ok()) return end_error(reply.status(), "host tuning");
    for (const auto& r : reply->results()) {
      spdlog::info("campaign {}: {} on {}: {} -> {} ({})", job->campaign, r.setting(), job->node,
                   r.previous(), r.current(), r.message());
    }
  }
  crest::v1::StartDaemonRequest start;
  const auto& p = trial.parameters();
  auto add_int = [&](const char* key, int64_t v) {
    auto* o = start.add_overrides();
    o->set_key(key);
    o->set_int_value(v);
  };
  add_int("maxBatchSize", p.max_batch_size());
  add_int("maxPrefillBatchSize", p.max_prefill_batch_size());
  if (p.support_select_batch()) {
    auto* o = start.add_overrides();
    o->set_key("supportSelectBatch");
    o->set_bool_value(true);
    add_int("prefillTimeMsPerReq", static_cast<int64_t>(p.prefill_time_ms_per_req()));
    add_int("decodeTimeMsPerReq", static_cast<int64_t>(p.decode_time_ms_per_req()));
  }
  *start.mutable_pinning() = spec.host().pin();
  start.set_replace_running(true);
  *start.mutable_start_timeout() = spec.limits().start_timeout();
  auto outcome = client->StartDaemon(
      start, FromProto(spec.limits().start_timeout()) + absl::Seconds(10), &job->cancel);
  if (!outcome.ok()) return end_error(outcome.status(), "starting the daemon");
  if (!outcome->ready) {
    const auto& f = outcome->failed_event;
    std::string kind = crest::v1::DaemonFailure_Name(f.kind());
    client->StopDaemon(options_.call_timeout).IgnoreError();
    if (job->cancel.cancelled()) return end_error(absl::CancelledError("stopped"), "");
    return end(f.kind() == crest::v1::DAEMON_FAILURE_OUT_OF_MEMORY ? crest::v1::TRIAL_INFEASIBLE
                                                                   : crest::v1::TRIAL_FAILED,
               absl::StrCat("daemon did not start (", kind, "): ", f.reason()));
  }
  trial.set_npu_block_num(outcome->ready_event.npu_block_num());
  crest::v1::BenchmarkSpec bench;
  const auto& cl = spec.client();
  bench.set_api(cl.api());
  bench.set_task_kind(cl.task_kind());
  *bench.mutable_dataset() = cl.dataset();
  bench.set_model_name(trial.model());
  bench.set_concurrency(p.concurrency());
  if (cl.mode() == crest::v1::CLIENT_MODE_RATE) bench.set_request_rate(cl.request_rate());
  bench.set_distribution(cl.distribution());
  bench.set_request_count(cl.request_count());
  bench.set_max_output_len(cl.max_output_len());
  bench.set_warmup_requests(cl.warmup_requests());
  bench.set_seed(1);
  const std::string trial_id = trial.id();
  auto result = client->RunBenchmark(
      bench, FromProto(spec.limits().benchmark_timeout()),
      [this, job, trial_id](const crest::v1::BenchmarkProgress& progress) {
        absl::MutexLock lock(&mu_);
        runs_.at(job->campaign).progress[trial_id] = progress;
        NotifyLocked(job->campaign);
      },
      &job->cancel);
  if (!result.ok()) return end_error(result.status(), "benchmark");
  client->StopDaemon(options_.call_timeout).IgnoreError();
  if (job->cancel.cancelled()) return end_error(absl::CancelledError("stopped"), "");
  *trial.mutable_result() = *result;
  if (auto agent = registry_->Get(job->node)) {
    auto it = agent->labels().find(kTimeScaleLabel);
    double scale = 0;
    if (it != agent->labels().end() && absl::SimpleAtod(it->second, &scale) && scale > 0) {
      NormalizeTimeScale(trial.mutable_result(), scale);
    }
  }
  if (result->succeeded() == 0) {
    std::vector<std::string> why;
    for (const auto& [k, v] : result->failures()) why.push_back(absl::StrCat(k, " x", v));
    return end(crest::v1::TRIAL_FAILED,
               absl::StrCat("no request succeeded (", absl::StrJoin(why, ", "), ")"));
  }
  end(crest::v1::TRIAL_OK, "");
}

void CampaignManager::FinishTrial(Job* job, Trial trial) {
  *trial.mutable_finished() = Now();
  registry_->SetRunningTrial(job->node, "");
  absl::MutexLock lock(&mu_);
  Run& run = runs_.at(job->campaign);
  Batch batch;
  batch.trials.push_back(trial);
  if (Persist(batch).ok()) {
    for (auto& t : run.stored.trials) {
      if (t.id() == trial.id()) t = trial;
    }
    if (metrics_ != nullptr) metrics_->RecordTrial(trial);
  }
  run.progress.erase(trial.id());
  spdlog::info("campaign {} model {}: trial {} maxBatchSize {} on {}: {}{}{}", trial.campaign_id(),
               trial.model(), trial.id(), trial.parameters().max_batch_size(), trial.node(),
               crest::v1::TrialStatus_Name(trial.status()),
               trial.status() == crest::v1::TRIAL_OK
                   ? absl::StrCat(" GenerateSpeed ", trial.result().generate_speed(), " tok/s")
                   : "",
               trial.reason().empty() ? "" : " (" + trial.reason() + ")");
  job->finished = true;
  wake_ = true;
  NotifyLocked(job->campaign);
}

Campaign CampaignManager::View(const Run& run) const {
  Campaign c = run.stored.campaign;
  const auto& spec = c.spec();
  for (const auto& m : spec.models()) {
    auto* mp = c.add_models();
    mp->set_model(m.name());
    auto ms_it = run.stored.models.find(m.name());
    ModelState ms = ms_it == run.stored.models.end() ? ModelState{} : ms_it->second;
    uint32_t done = 0;
    uint32_t failed = 0;
    uint32_t interrupted = 0;
    for (const auto& t : run.stored.trials) {
      if (t.model() != m.name() || !IsFinal(t.status())) continue;
      ++done;
      if (t.status() != crest::v1::TRIAL_OK) ++failed;
      if (t.status() == crest::v1::TRIAL_INTERRUPTED) ++interrupted;
    }
    mp->set_trials_done(done);
    mp->set_trials_failed(failed);
    if (auto best = BestOf(run.stored.trials, m.name())) *mp->mutable_best() = *best;
    mp->set_npu_block_num(ms.npu_block_num);
    mp->set_done(ms.done);
    bool known = !NeedsBlockNum(spec.search()) || ms.npu_block_num > 0;
    if (known) {
      SearchBounds b = DeriveBounds(spec, ms.npu_block_num);
      mp->set_range_lo(b.lo);
      mp->set_range_hi(b.hi);
      SearchSpace space{b.lo,
                        b.hi,
                        b.initial,
                        spec.search().step(),
                        spec.search().tolerance(),
                        spec.search().max_trials()};
      uint32_t planned =
          static_cast<uint32_t>(run.strategy->PlannedPoints(space)) * spec.search().repeats() +
          (spec.calibrate() ? 1 : 0) + interrupted;
      mp->set_trials_planned(ms.done ? done : std::max(planned, done));
    }
    std::vector<std::string> activity;
    for (const auto& [node, job] : jobs_) {
      if (job->campaign != c.id() || job->model != m.name()) continue;
      if (job->trial_id.empty()) {
        activity.push_back(absl::StrCat("probing npuBlockNum on ", node));
        continue;
      }
      for (const auto& t : run.stored.trials) {
        if (t.id() != job->trial_id) continue;
        if (mp->current_point() == 0) mp->set_current_point(t.parameters().max_batch_size());
        std::string what = absl::StrCat(t.calibration() ? "calibrating at " : "measuring ",
                                        t.parameters().max_batch_size(), " on ", node);
        auto pr = run.progress.find(t.id());
        if (pr != run.progress.end() && pr->second.requests_total() > 0) {
          absl::StrAppend(&what, " (", pr->second.requests_done(), "/", pr->second.requests_total(),
                          " requests)");
        }
        activity.push_back(what);
      }
    }
    if (ms.done) {
      mp->set_activity(ms.done_reason);
    } else if (!activity.empty()) {
      mp->set_activity(absl::StrJoin(activity, "; "));
    } else if (!IsFinalCampaign(c.state())) {
      mp->set_activity("waiting for a ready eligible node");
    }
  }
  return c;
}

}  // namespace crest::controller
