// Runs one trial, or the npuBlockNum probe, on one node through its
// AgentClient: the translation of trial parameters into the agent contract
// (ApplyHostTuning, StartDaemon overrides, RunBenchmark, StopDaemon) and of
// the agent's answers back into a finished trial record. It holds no
// campaign state and writes nothing; the campaign manager records what it
// returns.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "controller/agent_client.h"
#include "controller/agent_registry.h"
#include "controller/cancel.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

// Why the controller stopped a running job; a trial's outcome depends on it.
enum class StopReason { kNone, kCampaignCancelled, kNodeLost, kShutdown };

// A job's cancel signal with the reason it was raised for. The latest reason
// wins: a campaign cancelled after its node got lost ends cancelled.
class JobStop {
 public:
  void Stop(StopReason reason) {
    {
      absl::MutexLock lock(&mu_);
      reason_ = reason;
    }
    signal_.Cancel();
  }
  StopReason reason() const {
    absl::MutexLock lock(&mu_);
    return reason_;
  }
  CancelSignal* signal() { return &signal_; }

 private:
  mutable absl::Mutex mu_;
  StopReason reason_ ABSL_GUARDED_BY(mu_) = StopReason::kNone;
  CancelSignal signal_;
};

// What the probe start learnt.
struct ProbeResult {
  int64_t npu_block_num = 0;  // 0: not read, see `reason`
  std::string reason;
  // The daemon failed to start at its own defaults without being stopped:
  // it will not start for a search either.
  bool daemon_failed = false;
  // The daemon started but its log did not say npuBlockNum (only a warm-up
  // cache, the serving cache's line below the log level): another start
  // will not say more. `reason` is the agent's, with the fix.
  bool block_num_unknown = false;
};

class TrialRunner {
 public:
  // `registry` gives the node's liveness and labels, and learns when the node
  // turns out unreachable; `stop` is the job's (outlives the runner).
  // `slot`: the node's daemon slot the runner drives (0 without slots).
  TrialRunner(std::shared_ptr<AgentClient> client, std::string node, uint32_t slot,
              AgentRegistry* registry, absl::Duration call_timeout, JobStop* stop);

  // Starts the daemon once at its defaults to read npuBlockNum, then stops it.
  ProbeResult Probe(const crest::v1::CampaignSpec& spec);

  // Runs `trial` (parameters set): host tuning first when `tune_host`, the
  // daemon with the trial's overrides, the benchmark, then stops the daemon.
  // Returns the trial with status, reason, npuBlockNum and result (in
  // simulated time on a simulated node); `finished` is left to the caller.
  crest::v1::Trial Run(const crest::v1::CampaignSpec& spec, crest::v1::Trial trial, bool tune_host,
                       const std::function<void(const crest::v1::BenchmarkProgress&)>& on_progress);

  // Runs `first` and then, on the same daemon (no restart: its runs differ
  // only in client parameters), each trial `next(ended)` returns, until it
  // returns nullopt; then stops the daemon. Every ended trial goes to `next`,
  // a failed start included.
  void RunSweep(const crest::v1::CampaignSpec& spec, crest::v1::Trial first, bool tune_host,
                const std::function<void(const crest::v1::BenchmarkProgress&)>& on_progress,
                const std::function<std::optional<crest::v1::Trial>(crest::v1::Trial ended)>& next);

 private:
  // Host tuning when asked, then the daemon with the trial's overrides:
  // nullopt when it is ready, else the trial as it ended.
  std::optional<crest::v1::Trial> Prepare(const crest::v1::CampaignSpec& spec,
                                          crest::v1::Trial* trial, bool tune_host);
  // The benchmark on the ready daemon; stops it after unless `keep_daemon`
  // (and always when the run fails).
  crest::v1::Trial Measure(
      const crest::v1::CampaignSpec& spec, crest::v1::Trial trial,
      const std::function<void(const crest::v1::BenchmarkProgress&)>& on_progress,
      bool keep_daemon);
  crest::v1::TrialStatus Classify(const absl::Status& status, std::string* reason);
  crest::v1::Trial EndWithError(crest::v1::Trial trial, const absl::Status& status,
                                const std::string& what);

  std::shared_ptr<AgentClient> client_;
  std::string node_;
  uint32_t slot_ = 0;
  AgentRegistry* registry_;
  absl::Duration call_timeout_;
  JobStop* stop_;
  int64_t block_num_ = 0;  // npuBlockNum of the daemon started last
};

}  // namespace crest::controller
