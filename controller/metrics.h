// The controller's Prometheus metrics (prometheus-cpp): per model/node/point
// throughput gauges labelled so a Grafana panel can draw the throughput curve
// (x = max_batch_size label, y = value), trial counters by status, campaigns
// by state, agents ready/lost. Exposed by an Exposer on --metrics-listen.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "crest/v1/controller.pb.h"

namespace crest::controller {

class Metrics {
 public:
  Metrics();

  // A trial reached a final status.
  void RecordTrial(const crest::v1::Trial& trial);
  void SetCampaignCounts(const std::map<crest::v1::CampaignState, int>& counts);
  // Agents ready and lost among `agents`.
  void SetAgentCounts(const std::vector<crest::v1::AgentInfo>& agents);

  // Text exposition of everything (tests).
  std::string Serialize() const;
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>& speed_;
  prometheus::Family<prometheus::Gauge>& speed_per_client_;
  prometheus::Family<prometheus::Counter>& trials_;
  prometheus::Family<prometheus::Gauge>& campaigns_;
  prometheus::Family<prometheus::Gauge>& agents_;
  absl::Mutex mu_;
};

// Serves `metrics` on `address` (host:port, port 0 picks one). Exposer throws
// on a bind failure; that becomes a Status here.
class MetricsServer {
 public:
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& address,
                                                              const Metrics& metrics);
  int port() const;

 private:
  explicit MetricsServer(std::unique_ptr<prometheus::Exposer> exposer)
      : exposer_(std::move(exposer)) {}
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace crest::controller
