// The controller's Prometheus metrics (prometheus-cpp): per ok trial the
// throughput curve (x = max_batch_size label, y = value) and its latencies,
// best so far per campaign and model, trials by status, trial durations,
// campaign states, agents with the age of their last heartbeat and how often
// each was declared lost. Every label set is bounded by campaigns x models x
// nodes x points; no request ids or timestamps as labels. Names and units:
// docs/observability.md.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "common/clock.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

class Metrics {
 public:
  // `clock` (not owned, may be null for the system clock) dates heartbeat ages.
  explicit Metrics(const Clock* clock = nullptr);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // A trial reached a final status.
  void RecordTrial(const crest::v1::Trial& trial);
  void SetCampaignCounts(const std::map<crest::v1::CampaignState, int>& counts);
  // Each campaign's state, and when it last moved (started or ended a trial).
  void SetCampaigns(const std::vector<crest::v1::Campaign>& campaigns);
  // Agents ready and lost among `agents`, each one's state and last heartbeat.
  void SetAgentCounts(const std::vector<crest::v1::AgentInfo>& agents);
  // `node` was declared lost (AgentRegistry::SetOnLost).
  void RecordAgentLost(const std::string& node);

  // Text exposition of everything (tests).
  std::string Serialize() const;
  // What an exposer serves: the registry and the heartbeat ages computed at
  // scrape time.
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables() const;

 private:
  class HeartbeatAges;
  struct ModelTrials {
    std::vector<crest::v1::Trial> ok;  // ok, non-calibration
  };
  void UpdateBest(const std::string& campaign, const std::string& model)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<HeartbeatAges> ages_;
  prometheus::Family<prometheus::Gauge>& speed_;
  prometheus::Family<prometheus::Gauge>& speed_per_client_;
  prometheus::Family<prometheus::Gauge>& first_token_avg_;
  prometheus::Family<prometheus::Gauge>& first_token_p99_;
  prometheus::Family<prometheus::Gauge>& decode_avg_;
  prometheus::Family<prometheus::Gauge>& decode_p99_;
  prometheus::Family<prometheus::Gauge>& preemptions_;
  prometheus::Family<prometheus::Gauge>& best_speed_;
  prometheus::Family<prometheus::Gauge>& best_batch_;
  prometheus::Family<prometheus::Counter>& trials_;
  prometheus::Family<prometheus::Histogram>& duration_;
  prometheus::Family<prometheus::Gauge>& last_trial_end_;
  prometheus::Family<prometheus::Gauge>& last_progress_;
  prometheus::Family<prometheus::Gauge>& campaigns_;
  prometheus::Family<prometheus::Gauge>& campaign_state_;
  prometheus::Family<prometheus::Gauge>& agents_;
  prometheus::Family<prometheus::Gauge>& agent_up_;
  prometheus::Family<prometheus::Counter>& agent_lost_;
  absl::Mutex mu_;
  std::map<std::pair<std::string, std::string>, ModelTrials> trials_by_model_ ABSL_GUARDED_BY(mu_);
  // Last trial end per campaign (unix seconds).
  std::map<std::string, double> last_end_ ABSL_GUARDED_BY(mu_);
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
