#include "controller/metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>
#include <exception>

#include "absl/strings/str_cat.h"

#include "controller/campaign_io/report.h"
#include "controller/search/trial_outcomes.h"

namespace crest::controller {
namespace {

double UnixSeconds(const google::protobuf::Timestamp& t) {
  return static_cast<double>(t.seconds()) + t.nanos() / 1e9;
}

prometheus::Family<prometheus::Gauge>& MakeGauge(prometheus::Registry& registry, const char* name,
                                                 const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

// Minutes-long trials on a real NPU, a fraction of a second in simulated time.
const prometheus::Histogram::BucketBoundaries& DurationBuckets() {
  static const auto* const kBuckets = new prometheus::Histogram::BucketBoundaries{
      0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600};
  return *kBuckets;
}

}  // namespace

// Seconds since each agent's last heartbeat, computed when scraped so the
// age keeps growing while nothing else updates it (that is the point).
class Metrics::HeartbeatAges : public prometheus::Collectable {
 public:
  explicit HeartbeatAges(const Clock* clock) : clock_(clock) {}

  void Set(std::map<std::string, absl::Time> last_seen) {
    absl::MutexLock lock(&mu_);
    last_seen_ = std::move(last_seen);
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily family;
    family.name = "crest_agent_heartbeat_age_seconds";
    family.help = "Seconds since the agent's last heartbeat (or answered probe)";
    family.type = prometheus::MetricType::Gauge;
    const absl::Time now = clock_ != nullptr ? clock_->Now() : absl::Now();
    absl::MutexLock lock(&mu_);
    for (const auto& [node, seen] : last_seen_) {
      prometheus::ClientMetric m;
      m.label.push_back({"node", node});
      m.gauge.value = std::max(0.0, absl::ToDoubleSeconds(now - seen));
      family.metric.push_back(std::move(m));
    }
    return {family};
  }

 private:
  const Clock* clock_;
  mutable absl::Mutex mu_;
  std::map<std::string, absl::Time> last_seen_ ABSL_GUARDED_BY(mu_);
};

Metrics::Metrics(const Clock* clock)
    : registry_(std::make_shared<prometheus::Registry>()),
      ages_(std::make_shared<HeartbeatAges>(clock)),
      speed_(MakeGauge(*registry_, "crest_trial_generate_speed_tokens_per_second",
                       "GenerateSpeed (output tokens/s, all clients) of the latest ok trial per "
                       "campaign/model/node/maxBatchSize: the throughput curve")),
      speed_per_client_(MakeGauge(*registry_,
                                  "crest_trial_generate_speed_per_client_tokens_per_second",
                                  "GenerateSpeedPerClient of the latest ok trial per "
                                  "campaign/model/node/maxBatchSize")),
      first_token_avg_(MakeGauge(*registry_, "crest_trial_first_token_average_seconds",
                                 "Average first-token time of the latest ok trial per point")),
      first_token_p99_(MakeGauge(*registry_, "crest_trial_first_token_p99_seconds",
                                 "P99 first-token time of the latest ok trial per point")),
      decode_avg_(MakeGauge(*registry_, "crest_trial_decode_average_seconds",
                            "Average time between tokens of the latest ok trial per point")),
      decode_p99_(MakeGauge(*registry_, "crest_trial_decode_p99_seconds",
                            "P99 time between tokens of the latest ok trial per point")),
      preemptions_(MakeGauge(*registry_, "crest_trial_preemptions",
                             "Requests the daemon preempted during the latest ok trial per point "
                             "(absent when the daemon does not publish it)")),
      best_speed_(
          MakeGauge(*registry_, "crest_best_generate_speed_tokens_per_second",
                    "Best GenerateSpeed so far per campaign and model (mean over repeats)")),
      best_batch_(MakeGauge(*registry_, "crest_best_max_batch_size",
                            "maxBatchSize of the best point so far per campaign and model")),
      trials_(prometheus::BuildCounter()
                  .Name("crest_trials_total")
                  .Help("Trials that ended, by campaign, model and status")
                  .Register(*registry_)),
      duration_(prometheus::BuildHistogram()
                    .Name("crest_trial_duration_seconds")
                    .Help("Wall time of a trial from start to end (daemon start and benchmark)")
                    .Register(*registry_)),
      last_trial_end_(MakeGauge(*registry_, "crest_campaign_last_trial_end_timestamp_seconds",
                                "Unix time the campaign's latest trial ended")),
      last_progress_(MakeGauge(*registry_, "crest_campaign_last_progress_timestamp_seconds",
                               "Unix time the campaign started or last ended a trial, whichever is "
                               "later (a running campaign whose value is old is stalled)")),
      campaigns_(MakeGauge(*registry_, "crest_campaigns", "Campaigns by state")),
      campaign_state_(MakeGauge(*registry_, "crest_campaign_state",
                                "1 for the campaign's current state, 0 for the others")),
      agents_(MakeGauge(*registry_, "crest_agents", "Known agents by state")),
      agent_up_(MakeGauge(*registry_, "crest_agent_up",
                          "1 while the agent is ready (heartbeating), 0 once it is lost")),
      agent_lost_(prometheus::BuildCounter()
                      .Name("crest_agent_lost_total")
                      .Help("Times the agent was declared lost (missed heartbeats or unreachable)")
                      .Register(*registry_)) {}

Metrics::~Metrics() = default;

void Metrics::RecordTrial(const crest::v1::Trial& trial) {
  absl::MutexLock lock(&mu_);
  const std::string status = TrialStatusName(trial.status());
  trials_.Add({{"campaign", trial.campaign_id()}, {"model", trial.model()}, {"status", status}})
      .Increment();
  if (trial.has_started() && trial.has_finished()) {
    const double secs = UnixSeconds(trial.finished()) - UnixSeconds(trial.started());
    duration_.Add({{"model", trial.model()}, {"status", status}}, DurationBuckets())
        .Observe(std::max(0.0, secs));
  }
  if (trial.has_finished()) {
    double& end = last_end_[trial.campaign_id()];
    end = std::max(end, UnixSeconds(trial.finished()));
    last_trial_end_.Add({{"campaign", trial.campaign_id()}}).Set(end);
    auto& progress = last_progress_.Add({{"campaign", trial.campaign_id()}});
    progress.Set(std::max(progress.Value(), end));
  }
  // The per-point series are the maxBatchSize curve; a rate-search run at the
  // chosen point would overwrite it with a rate-limited figure.
  if (trial.status() != crest::v1::TRIAL_OK || trial.rate_search()) return;
  const std::map<std::string, std::string> labels = {
      {"campaign", trial.campaign_id()},
      {"model", trial.model()},
      {"node", trial.node()},
      {"max_batch_size", absl::StrCat(trial.parameters().max_batch_size())},
      {"calibration", trial.calibration() ? "true" : "false"}};
  const auto& r = trial.result();
  speed_.Add(labels).Set(r.generate_speed());
  speed_per_client_.Add(labels).Set(r.generate_speed_per_client());
  first_token_avg_.Add(labels).Set(r.first_token_time().average_ms() / 1000);
  first_token_p99_.Add(labels).Set(r.first_token_time().p99_ms() / 1000);
  decode_avg_.Add(labels).Set(r.decode_time().average_ms() / 1000);
  decode_p99_.Add(labels).Set(r.decode_time().p99_ms() / 1000);
  if (r.has_daemon() && r.daemon().has_preemptions()) {
    preemptions_.Add(labels).Set(static_cast<double>(r.daemon().preemptions()));
  }
  if (trial.calibration()) return;
  trials_by_model_[{trial.campaign_id(), trial.model()}].ok.push_back(trial);
  UpdateBest(trial.campaign_id(), trial.model());
}

void Metrics::UpdateBest(const std::string& campaign, const std::string& model) {
  const auto& trials = trials_by_model_[{campaign, model}].ok;
  std::optional<crest::v1::BestConfig> best = BestOf(trials, model);
  if (!best.has_value()) return;
  best_speed_.Add({{"campaign", campaign}, {"model", model}}).Set(best->generate_speed());
  best_batch_.Add({{"campaign", campaign}, {"model", model}})
      .Set(static_cast<double>(best->parameters().max_batch_size()));
}

void Metrics::SetCampaignCounts(const std::map<crest::v1::CampaignState, int>& counts) {
  absl::MutexLock lock(&mu_);
  for (auto state :
       {crest::v1::CAMPAIGN_PENDING, crest::v1::CAMPAIGN_RUNNING, crest::v1::CAMPAIGN_SUCCEEDED,
        crest::v1::CAMPAIGN_FAILED, crest::v1::CAMPAIGN_CANCELLED}) {
    auto it = counts.find(state);
    campaigns_.Add({{"state", CampaignStateName(state)}}).Set(it == counts.end() ? 0 : it->second);
  }
}

void Metrics::SetCampaigns(const std::vector<crest::v1::Campaign>& campaigns) {
  std::map<crest::v1::CampaignState, int> counts;
  for (const auto& c : campaigns) ++counts[c.state()];
  SetCampaignCounts(counts);
  absl::MutexLock lock(&mu_);
  for (const auto& c : campaigns) {
    for (auto state :
         {crest::v1::CAMPAIGN_PENDING, crest::v1::CAMPAIGN_RUNNING, crest::v1::CAMPAIGN_SUCCEEDED,
          crest::v1::CAMPAIGN_FAILED, crest::v1::CAMPAIGN_CANCELLED}) {
      campaign_state_.Add({{"campaign", c.id()}, {"state", CampaignStateName(state)}})
          .Set(c.state() == state ? 1 : 0);
    }
    if (c.has_started()) {
      auto& progress = last_progress_.Add({{"campaign", c.id()}});
      progress.Set(std::max(progress.Value(), UnixSeconds(c.started())));
    }
  }
}

void Metrics::SetAgentCounts(const std::vector<crest::v1::AgentInfo>& agents) {
  int ready = 0;
  int lost = 0;
  std::map<std::string, absl::Time> seen;
  for (const auto& a : agents) {
    (a.state() == crest::v1::AGENT_READY ? ready : lost)++;
    if (a.has_last_seen()) {
      seen[a.node_name()] =
          absl::FromUnixSeconds(a.last_seen().seconds()) + absl::Nanoseconds(a.last_seen().nanos());
    }
  }
  ages_->Set(std::move(seen));
  absl::MutexLock lock(&mu_);
  agents_.Add({{"state", "ready"}}).Set(ready);
  agents_.Add({{"state", "lost"}}).Set(lost);
  for (const auto& a : agents) {
    agent_up_.Add({{"node", a.node_name()}}).Set(a.state() == crest::v1::AGENT_READY ? 1 : 0);
  }
}

void Metrics::RecordAgentLost(const std::string& node) {
  absl::MutexLock lock(&mu_);
  agent_lost_.Add({{"node", node}}).Increment();
}

std::vector<std::shared_ptr<prometheus::Collectable>> Metrics::collectables() const {
  return {registry_, ages_};
}

std::string Metrics::Serialize() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (auto& f : ages_->Collect()) families.push_back(std::move(f));
  return prometheus::TextSerializer().Serialize(families);
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& address,
                                                                    const Metrics& metrics) {
  try {
    auto exposer = std::make_unique<prometheus::Exposer>(address);
    for (const auto& c : metrics.collectables()) exposer->RegisterCollectable(c);
    return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(exposer)));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("--metrics-listen ", address, ": cannot serve metrics: ", e.what()));
  }
}

int MetricsServer::port() const {
  auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

}  // namespace crest::controller
