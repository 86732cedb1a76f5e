// The campaign engine: owns every campaign's in-memory state, a write-through
// cache of the state store, and schedules the trials of all running
// campaigns on free, ready, eligible nodes, each on its own thread through a
// TrialRunner. It retries trials interrupted by a lost node or a controller
// restart (bounded, never counted twice) and restores every tuned host when a
// campaign ends. The first failed write of state is kept, as LevelDB keeps
// its background error: the campaign it concerned fails, and every later
// change is refused until a restart reloads the store, which is the truth.
// Plain class: the gRPC service is a thin adapter over it.
// Defined in campaign_manager.cc (campaigns, scheduling), campaign_jobs.cc
// (a job's launch and end) and campaign_put_back.cc (hosts and nodes put back).
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
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "common/clock.h"
#include "controller/agent_client.h"
#include "controller/agent_prober.h"
#include "controller/agent_registry.h"
#include "controller/campaign_notifier.h"
#include "controller/host_restore.h"
#include "controller/job_table.h"
#include "controller/metrics.h"
#include "controller/search/search.h"
#include "controller/state_writer.h"
#include "controller/store.h"
#include "controller/trial_runner.h"
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
  // Where the shipped profiles and GSM8K are (profiles/, datasets/gsm8k), for
  // a search.prior's fit; empty: ShareDir().
  std::string share_dir;
};

class CampaignManager {
 public:
  CampaignManager(StateStore* store, AgentRegistry* registry, AgentConnector* connector,
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
  // FAILED_PRECONDITION once a write of state has failed (so does Cancel).
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

  // The first failed write of state; OK while there was none.
  absl::Status persistence_error() const;
  // `cb(error)` once, from the scheduling thread, after a write of state
  // first failed. Set before Start().
  void SetOnPersistenceError(std::function<void(const absl::Status&)> cb);

 private:
  struct Run {
    StoredCampaign stored;
    std::map<std::string, crest::v1::BenchmarkProgress> progress;  // trial -> latest
    bool finishing = false;                                        // restoring hosts
    int64_t next_trial = 1;
  };

  void Loop();
  void SchedulePass() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ScheduleCampaign(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ScheduleModel(Run& run, int model_index, std::set<std::string>& busy)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeFinish(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // search.prior: the fits of `spec`'s models to the prior campaign's runs,
  // as their first states, and a warning per model that starts cold.
  absl::StatusOr<std::map<std::string, ModelState>> FitPriors(const crest::v1::CampaignSpec& spec,
                                                              std::vector<std::string>* warnings)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Once the range is known, the peak `model`'s prior fit predicts (or why
  // none), recorded in its state.
  void PredictFromPrior(Run& run, const std::string& model) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LaunchProbe(Run& run, const std::string& model, const std::string& node)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LaunchTrial(Run& run, crest::v1::Trial trial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Commits `batch` for a job about to start (with the campaign's start when
  // it is the first) and applies the start.
  absl::Status CommitLaunch(Run& run, Batch batch, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishProbe(JobTable::Job* job, const ProbeResult& probe);
  void FinishTrial(JobTable::Job* job, crest::v1::Trial trial);
  // Records `trial` as it ended on `job`'s node (the trial only, not the job).
  void RecordEnded(JobTable::Job* job, crest::v1::Trial trial) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A rate-search run ended: records it and returns the next run of the same
  // search (recorded as started on the same node, to reuse its daemon), or
  // nullopt when the search is over for now.
  std::optional<crest::v1::Trial> NextRateRun(JobTable::Job* job, crest::v1::Trial ended);
  void FinishSweep(JobTable::Job* job);
  // Restores the hosts the campaign tuned; `finish`: then ends it.
  void RestoreHosts(const std::string& campaign_id, bool finish) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndCampaign(const std::string& campaign_id, bool finish,
                   const std::vector<std::string>& unrestored);
  // Puts back the nodes of returning_ that are heard from again: stops the
  // daemon an interrupted trial left, then restores the host settings of the
  // campaigns that ended while the node was away.
  void ResetReturnedNodes() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Commits and applies the search state of one model; false when refused.
  bool SetModelState(Run& run, const std::string& model, const ModelState& state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Commits `batch`, the record of `what` for campaign `campaign_id` (empty:
  // of no single campaign). The first failure fails that campaign.
  absl::Status Persist(const Batch& batch, const std::string& campaign_id, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailCampaign(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  crest::v1::Campaign View(const Run& run) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateCampaignMetrics() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  google::protobuf::Timestamp Now() const;

  StateStore* store_;
  AgentRegistry* registry_;
  const Clock* clock_;
  Metrics* metrics_;
  ManagerOptions options_;

  mutable absl::Mutex mu_;
  StateWriter writer_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Run> runs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);  // campaign ids, creation order
  JobTable jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> probe_failures_ ABSL_GUARDED_BY(mu_);  // campaign/model -> count
  // campaign/model -> node -> why the daemon failed to start there at its
  // defaults: the next probe goes to another node; the model ends when every
  // eligible node has failed (ScheduleModel).
  std::map<std::string, std::map<std::string, std::string>> probe_failed_on_ ABSL_GUARDED_BY(mu_);
  // Nodes lost with a trial on them, or not restored at a campaign's end
  // because unreachable: no job goes there until they are put back.
  // The value: not before then (a channel that was cut needs a moment, its
  // reconnect back-off, to connect again).
  std::map<std::string, absl::Time> returning_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> resetting_ ABSL_GUARDED_BY(mu_);  // being put back now
  // "campaign/model" of an exclusive model that found no node free of jobs ->
  // the node it drains: no other job starts there until that model's search
  // ends, so busy neighbours cannot keep it waiting forever (ScheduleModel).
  std::map<std::string, std::string> draining_ ABSL_GUARDED_BY(mu_);
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool persistence_error_reported_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void(const absl::Status&)> on_persistence_error_;
  std::thread loop_;
  StaticAgentProber prober_;
  HostRestorer restorer_;
  CampaignNotifier notifier_;
};

}  // namespace crest::controller
