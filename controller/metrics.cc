#include "controller/metrics.h"

#include <prometheus/text_serializer.h>

#include <exception>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace crest::controller {

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      speed_(prometheus::BuildGauge()
                 .Name("crest_trial_generate_speed_tokens_per_second")
                 .Help("GenerateSpeed of the latest ok trial per campaign/model/node/maxBatchSize")
                 .Register(*registry_)),
      speed_per_client_(prometheus::BuildGauge()
                            .Name("crest_trial_generate_speed_per_client_tokens_per_second")
                            .Help("GenerateSpeedPerClient of the latest ok trial per "
                                  "campaign/model/node/maxBatchSize")
                            .Register(*registry_)),
      trials_(prometheus::BuildCounter()
                  .Name("crest_trials_total")
                  .Help("Trials that ended, by model and status")
                  .Register(*registry_)),
      campaigns_(prometheus::BuildGauge()
                     .Name("crest_campaigns")
                     .Help("Campaigns by state")
                     .Register(*registry_)),
      agents_(prometheus::BuildGauge()
                  .Name("crest_agents")
                  .Help("Known agents by state")
                  .Register(*registry_)) {}

void Metrics::RecordTrial(const crest::v1::Trial& trial) {
  absl::MutexLock lock(&mu_);
  std::string status = absl::AsciiStrToLower(
      absl::StripPrefix(crest::v1::TrialStatus_Name(trial.status()), "TRIAL_"));
  trials_.Add({{"model", trial.model()}, {"status", status}}).Increment();
  if (trial.status() != crest::v1::TRIAL_OK) return;
  std::map<std::string, std::string> labels = {
      {"campaign", trial.campaign_id()},
      {"model", trial.model()},
      {"node", trial.node()},
      {"max_batch_size", absl::StrCat(trial.parameters().max_batch_size())},
      {"calibration", trial.calibration() ? "true" : "false"}};
  speed_.Add(labels).Set(trial.result().generate_speed());
  speed_per_client_.Add(labels).Set(trial.result().generate_speed_per_client());
}

void Metrics::SetCampaignCounts(const std::map<crest::v1::CampaignState, int>& counts) {
  absl::MutexLock lock(&mu_);
  for (auto state :
       {crest::v1::CAMPAIGN_PENDING, crest::v1::CAMPAIGN_RUNNING, crest::v1::CAMPAIGN_SUCCEEDED,
        crest::v1::CAMPAIGN_FAILED, crest::v1::CAMPAIGN_CANCELLED}) {
    auto it = counts.find(state);
    std::string name =
        absl::AsciiStrToLower(absl::StripPrefix(crest::v1::CampaignState_Name(state), "CAMPAIGN_"));
    campaigns_.Add({{"state", name}}).Set(it == counts.end() ? 0 : it->second);
  }
}

void Metrics::SetAgentCounts(const std::vector<crest::v1::AgentInfo>& agents) {
  int ready = 0;
  int lost = 0;
  for (const auto& a : agents) (a.state() == crest::v1::AGENT_READY ? ready : lost)++;
  absl::MutexLock lock(&mu_);
  agents_.Add({{"state", "ready"}}).Set(ready);
  agents_.Add({{"state", "lost"}}).Set(lost);
}

std::string Metrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& address,
                                                                    const Metrics& metrics) {
  try {
    auto exposer = std::make_unique<prometheus::Exposer>(address);
    exposer->RegisterCollectable(metrics.registry());
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
