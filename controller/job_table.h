// The jobs running on node_slots (node_slot.h: a daemon slot of a node), a trial or
// an npuBlockNum probe each, at most one per node_slot across all campaigns, each on its own thread
// with a stop signal and a TrialRunner over the node's agent. Not thread-safe: the campaign manager
// guards it with its lock, and joins the threads it takes out of it outside that lock. The threads
// report back through callbacks, which take that lock themselves.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"

#include "controller/agent_client.h"
#include "controller/agent_registry.h"
#include "controller/campaign_view.h"
#include "controller/search/node_slot.h"
#include "controller/trial_runner.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

class JobTable {
 public:
  struct Job {
    std::string campaign;
    std::string node;
    uint32_t slot = 0;
    std::string model;
    std::string trial_id;    // empty for a probe
    bool exclusive = false;  // its model's `exclusive`: it has the node alone
    JobStop stop;
    bool finished = false;  // its outcome is recorded; the thread is ending
    // The most other jobs on its node at once since it started (or since
    // its last TakeNeighbours).
    uint32_t neighbours = 0;
    std::thread thread;
  };

  JobTable(AgentRegistry* registry, AgentConnector* connector, absl::Duration call_timeout)
      : registry_(registry), connector_(connector), call_timeout_(call_timeout) {}
  JobTable(const JobTable&) = delete;
  JobTable& operator=(const JobTable&) = delete;

  // Probes npuBlockNum on `node_slot` (which must be free), then `done(job, result)`.
  void StartProbe(const std::string& campaign, const std::string& model, const NodeSlot& node_slot,
                  crest::v1::CampaignSpec spec, std::function<void(Job*, ProbeResult)> done);
  // Runs `trial` on its node (which must be free), reporting benchmark
  // progress, then `done(job, trial as it ended)`.
  void StartTrial(crest::v1::CampaignSpec spec, crest::v1::Trial trial, bool tune_host,
                  std::function<void(const crest::v1::BenchmarkProgress&)> on_progress,
                  std::function<void(Job*, crest::v1::Trial)> done);

  // Runs `first` on its node (which must be free) and then, on the same
  // daemon, each trial `next(job, ended)` returns (TrialRunner::RunSweep);
  // `done(job)` once the daemon is stopped.
  void StartSweep(crest::v1::CampaignSpec spec, crest::v1::Trial first, bool tune_host,
                  std::function<void(const crest::v1::BenchmarkProgress&)> on_progress,
                  std::function<std::optional<crest::v1::Trial>(Job*, crest::v1::Trial)> next,
                  std::function<void(Job*)> done);

  // How many other jobs `job` had beside it on its node at most, since it
  // started or the last call; restarts the count from those there now.
  uint32_t TakeNeighbours(Job* job) const;
  // Whether a job runs on the node_slot named `node_slot_key` (NodeSlotKey).
  bool Busy(const std::string& node_slot_key) const { return jobs_.count(node_slot_key) != 0; }
  // Whether a job runs on any slot of `node`.
  bool NodeBusy(const std::string& node) const;
  // Whether the job of an `exclusive` model runs on `node`: nothing else may start there.
  bool NodeHeldWhole(const std::string& node) const;
  // The trial the job on `node_slot_key` runs now ("" for none or a probe).
  std::string TrialOn(const std::string& node_slot_key) const;
  // The jobs of `campaign` (only those of `model`, when not empty).
  int Count(const std::string& campaign, const std::string& model = "") const;
  // The jobs of `campaign`, in node order.
  std::vector<RunningJob> Of(const std::string& campaign) const;

  // Stops the jobs of `campaign` (every job, when empty) for `reason`.
  void Stop(const std::string& campaign, StopReason reason);
  // Stops, as lost, the running jobs on nodes that are not `ready`, unless
  // they were stopped already.
  void StopLost(const std::function<bool(const std::string& node)>& ready);

  // Takes out the finished jobs (every job, with `all`) to join their threads.
  std::vector<std::unique_ptr<Job>> Take(bool all);
  // Waits for the threads of jobs taken out (outside the lock they report under).
  static void Join(std::vector<std::unique_ptr<Job>> jobs);

 private:
  // The unfinished jobs on `node` other than `except`.
  std::vector<Job*> OthersOn(const std::string& node, const Job* except) const;
  // Runs `body(job, runner)` on a new thread as the job on `node_slot`.
  void Start(const crest::v1::CampaignSpec& spec, const std::string& campaign,
             const NodeSlot& node_slot, const std::string& model, const std::string& trial_id,
             std::function<void(Job*, TrialRunner*)> body);

  AgentRegistry* registry_;
  AgentConnector* connector_;
  absl::Duration call_timeout_;
  std::map<std::string, std::unique_ptr<Job>> jobs_;  // by NodeSlotKey
};

}  // namespace crest::controller
