// The campaign engine: owns every campaign's in-memory state (a write-through
// cache of the Store), schedules trials of all running campaigns on free,
// ready, eligible nodes, runs each trial on its own thread through an
// AgentClient, retries trials interrupted by a lost node or a controller
// restart (bounded, never counted twice), and restores every tuned host when
// a campaign ends. Plain class: the gRPC service is a thin adapter over it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "common/clock.h"
#include "controller/agent_client.h"
#include "controller/agent_registry.h"
#include "controller/metrics.h"
#include "controller/search.h"
#include "controller/store.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

struct ManagerOptions {
  // Real time between scheduling passes when nothing happens (liveness checks,
  // probes of static agents).
  absl::Duration tick = absl::Milliseconds(250);
  // Deadline of the short agent calls (node info, host tuning, stop).
  absl::Duration call_timeout = absl::Seconds(15);
  // How often static agents are probed with GetNodeInfo (their heartbeat).
  absl::Duration probe_interval = absl::Seconds(2);
};

class CampaignManager {
 public:
  CampaignManager(Store* store, AgentRegistry* registry, AgentConnector* connector,
                  const Clock* clock, Metrics* metrics, ManagerOptions options = {});
  ~CampaignManager();
  CampaignManager(const CampaignManager&) = delete;
  CampaignManager& operator=(const CampaignManager&) = delete;

  // Loads the store: trials that were running when the controller died are
  // marked interrupted (and re-run), unfinished campaigns resume, hosts of
  // ended campaigns not yet restored are restored. Starts the threads.
  absl::Status Start();
  // Stops scheduling; running trials are cancelled and recorded as
  // interrupted (a restart re-runs them). Idempotent.
  void Shutdown();

  // Validates (INVALID_ARGUMENT listing every problem) and queues.
  absl::StatusOr<crest::v1::Campaign> Create(crest::v1::CampaignSpec spec);
  absl::StatusOr<crest::v1::Campaign> Get(const std::string& id) const;
  std::vector<crest::v1::Campaign> List() const;
  absl::StatusOr<crest::v1::Campaign> Cancel(const std::string& id);
  absl::StatusOr<crest::v1::CampaignReport> Report(const std::string& id) const;

  // `cb(campaign)` after every change of a campaign (state, trials,
  // progress), from the manager's notifier thread; must not block.
  int Subscribe(std::function<void(const crest::v1::Campaign&)> cb);
  void Unsubscribe(int id);

  // Wakes the scheduler (registry changes).
  void Poke();

 private:
  enum class StopReason { kNone, kCampaignCancelled, kNodeLost, kShutdown };
  struct Job {
    std::string campaign;
    std::string model;
    std::string node;
    std::string trial_id;  // empty for a probe
    CancelSignal cancel;
    StopReason stop_reason = StopReason::kNone;
    bool finished = false;
    std::thread thread;
  };
  struct Run {
    StoredCampaign stored;
    std::unique_ptr<SearchStrategy> strategy;
    std::map<std::string, crest::v1::BenchmarkProgress> progress;  // trial -> latest
    bool finishing = false;                                        // restoring hosts
    int64_t next_trial = 1;
  };

  void Loop();
  void ProbeLoop();
  void SchedulePass() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ScheduleCampaign(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ScheduleModel(Run& run, int model_index, std::set<std::string>& busy)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeFinish(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::string> FreeEligibleNodes(const crest::v1::ModelSpec& model,
                                             const std::set<std::string>& busy) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LaunchProbe(Run& run, const std::string& model, const std::string& node)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LaunchTrial(Run& run, crest::v1::Trial trial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunProbe(Job* job);
  void RunTrial(Job* job, crest::v1::Trial trial);
  void RestoreHosts(const std::string& campaign_id, bool finish);
  crest::v1::TrialStatus Classify(Job* job, const absl::Status& status, std::string* reason);
  void FinishTrial(Job* job, crest::v1::Trial trial);
  absl::Status Persist(const Batch& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  crest::v1::Campaign View(const Run& run) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NotifierLoop();
  void NotifyLocked(const std::string& campaign_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateCampaignMetrics() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  crest::v1::TrialParameters ParametersFor(const Run& run, int model_index, int64_t point,
                                           bool calibration) const;
  google::protobuf::Timestamp Now() const;

  Store* store_;
  AgentRegistry* registry_;
  AgentConnector* connector_;
  const Clock* clock_;
  Metrics* metrics_;
  ManagerOptions options_;

  mutable absl::Mutex mu_;
  std::map<std::string, Run> runs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);  // campaign ids, creation order
  std::map<std::string, std::unique_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);  // by node
  std::set<std::string> pending_notify_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> probe_failures_ ABSL_GUARDED_BY(mu_);  // campaign/model -> count
  std::vector<std::thread> restorers_ ABSL_GUARDED_BY(mu_);
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::thread loop_;
  std::thread prober_;
  std::thread notifier_;

  absl::Mutex subscribers_mu_;
  int next_subscriber_ ABSL_GUARDED_BY(subscribers_mu_) = 0;
  std::map<int, std::function<void(const crest::v1::Campaign&)>> subscribers_
      ABSL_GUARDED_BY(subscribers_mu_);
};

// Label by which a simulated node declares how much faster than real time its
// daemon runs; the controller then records figures in simulated time.
inline constexpr char kTimeScaleLabel[] = "sim-time-scale";

// Divides throughputs by `scale` and multiplies latencies and the duration by
// it: the figures the simulated hardware would show in real time.
void NormalizeTimeScale(crest::v1::BenchmarkResult* result, double scale);

// The campaign's report (also what `crest campaign report` prints).
crest::v1::CampaignReport BuildReport(const StoredCampaign& stored);

// Best configuration of a model from its ok, non-calibration trials: the
// point whose mean GenerateSpeed over repeats is highest (nullopt: none ok).
std::optional<crest::v1::BestConfig> BestOf(const std::vector<crest::v1::Trial>& trials,
                                            const std::string& model);

}  // namespace crest::controller
