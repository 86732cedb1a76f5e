// Runs the one serving daemon of this node (mindie-sim or the real
// mindieservice_daemon) and reports its life cycle: start = write the
// overrides into config.json (from the original), spawn the configured
// binary in its own process group pinned to the requested CPUs, capture its
// output to a rotating log, read it for `Daemon start success!`, the serving
// KV cache's npuBlockNum, fatal out-of-memory and config errors
// (StartupLog), watch for an early exit and the start deadline, then wait for
// the management /v2/health/ready endpoint and, when only a warm-up cache was
// logged, send one short request so the daemon logs the serving one. Stop = SIGTERM, grace, SIGKILL
// of the group, reap, restore config.json. A crash after READY is noticed and reported. No daemon
// runs unrecorded: its pid record is written (durably) while the child waits before exec, a failed
// write refuses the start, and the kernel SIGKILLs the daemon when the agent dies (parent-death
// signal, armed from a spawn thread that lives as long as the agent). Defined in
// daemon_supervisor.cc (start, status) and daemon_watch.cc (the daemon's output and exit, stop).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "agent/agent_config.h"
#include "agent/config_json_editor.h"
#include "agent/daemon_output.h"  // ParseKCacheBlocks, for the fuzzer and tests
#include "agent/rotating_log.h"
#include "common/clock.h"
#include "common/subprocess.h"
#include "crest/v1/agent.pb.h"

namespace crest::agent {

struct StartParams {
  // config.json for this start: the original, parsed once, with the
  // validated overrides set (NodeAgent::PrepareStart). Absent: the original
  // as it is, loaded by Start.
  std::optional<MindieConfig> config_json;
  std::vector<uint32_t> cpus;  // resolved pinning; empty: not pinned
  bool replace_running = false;
  std::optional<absl::Duration> start_timeout;  // capped by the config's
  bool stream_log = false;
  uint32_t slot = 0;  // whose supervisor runs it (NodeAgent)
};

class DaemonSupervisor {
 public:
  using EventSink = std::function<void(const crest::v1::DaemonEvent&)>;
  // Called after every state change (metrics, heartbeats); must not block.
  using StateListener = std::function<void(const crest::v1::DaemonStatus&)>;

  DaemonSupervisor(AgentConfig config, std::string state_dir, const Clock* clock);
  // Stops a running daemon.
  ~DaemonSupervisor();
  DaemonSupervisor(const DaemonSupervisor&) = delete;
  DaemonSupervisor& operator=(const DaemonSupervisor&) = delete;

  void SetStateListener(StateListener listener);

  // After a crash of the agent: kills a daemon a previous agent left running
  // (recorded pid with the same start time and boot) and what is left of its
  // process group, and restores config.json.
  absl::Status RecoverAtStart();

  // Blocks until the daemon is READY or has FAILED (both sent to `sink`), or
  // `*cancel` turns true (the daemon is then stopped). Returns an error, with
  // nothing sent, when the start is refused (one runs or starts already).
  absl::Status Start(const StartParams& params, const EventSink& sink,
                     const std::atomic<bool>* cancel);

  // Stops the daemon (also one still starting). No daemon: was_running false.
  crest::v1::StopDaemonReply Stop(std::optional<absl::Duration> grace);

  crest::v1::DaemonStatus Status() const;
  // Why the daemon `pid` (the one a benchmark measured) is gone: it exited,
  // or another took its place; nullopt while it runs. Asks the kernel (its
  // pidfd), so an exit is seen before the watch thread has handled it.
  std::optional<std::string> GoneSince(int32_t pid) const;
  // The config.json values the daemon was started with (benchmark target):
  // the view of the last start, kept from it, not read again.
  absl::StatusOr<MindieConfigView> CurrentConfig() const;
  std::vector<uint32_t> PinnedCpus() const;
  const AgentConfig& config() const { return config_; }

 private:
  struct Run;  // one spawned daemon and what was seen of it
  // Why a start failed, as its DaemonFailed event says.
  struct StartFailure {
    crest::v1::DaemonFailure kind = crest::v1::DAEMON_FAILURE_UNSPECIFIED;
    std::string reason;
  };
  // A spawned daemon on its way to READY: what the two waits share.
  struct StartWait {
    std::shared_ptr<Run> run;
    absl::Time deadline;
    std::string timeout_text;                   // the start timeout, as a failure quotes it
    const std::atomic<bool>* cancel = nullptr;  // Start's; may be null
  };

  // Start's phases, in order (daemon_supervisor.cc).
  absl::Status StopPrevious(bool replace_running) ABSL_EXCLUSIVE_LOCKS_REQUIRED(op_mu_);
  // config.json: the original plus this start's overrides, written; its view.
  absl::StatusOr<MindieConfig> WriteConfigJson(const StartParams& params);
  SpawnOptions DaemonSpawnOptions(const std::vector<uint32_t>& cpus);
  // Null when the daemon could not be spawned or pinned (FAILED sent to `sink`).
  std::shared_ptr<Run> SpawnDaemon(const SpawnOptions& options, const StartParams& params,
                                   const EventSink& sink);
  void PublishStarting(const std::shared_ptr<Run>& run, const MindieConfigView& view,
                       const EventSink& sink);
  // Phase 1: the log says it loaded (or fails); its lines go to `sink`.
  std::optional<StartFailure> AwaitStartSuccess(const StartWait& wait, const EventSink& sink);
  StartFailure ExitedBeforeSuccess(const Run& run);
  // Phase 2: the management port answers ready.
  std::optional<StartFailure> AwaitHealthReady(const StartWait& wait, const std::string& ready_url);
  // Phase 3: npuBlockNum of the serving cache, with one short request when
  // only a warm-up cache was logged (startup_log.h).
  void ReadServingCache(const StartWait& wait, const MindieConfigView& view);
  bool StartCancelled(const StartWait& wait) const;
  void PublishReady(const Run& run, const MindieConfigView& view, const EventSink& sink);
  // A start that ends FAILED: before a daemon ran, or killing the one that runs.
  void FailBeforeSpawn(const StartFailure& failure, const EventSink& sink);
  void FailStart(const std::shared_ptr<Run>& run, const StartFailure& failure,
                 const EventSink& sink);
  void ReportStartFailure(const crest::v1::DaemonEvent& failed, const EventSink& sink);

  crest::v1::DaemonEvent NewEvent() const;
  void Monitor(const std::shared_ptr<Run>& run);
  void OnLine(Run& run, const std::string& line) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  crest::v1::StopDaemonReply StopLocked(absl::Duration grace) ABSL_EXCLUSIVE_LOCKS_REQUIRED(op_mu_);
  void SetState(crest::v1::DaemonState state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notify();
  crest::v1::DaemonFailed Fail(Run& run, crest::v1::DaemonFailure kind, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string pid_record_path() const { return state_dir_ + "/daemon-pid.json"; }
  absl::Status WritePidRecord(pid_t pid);
  void RemovePidRecord();

  const AgentConfig config_;
  const std::string state_dir_;
  const Clock* const clock_;
  ConfigJsonFile config_json_;
  // Test-only (env CREST_TESTING_HOLD_BEFORE_PID_RECORD=1): the spawn stops
  // for good between fork and the pid record, so a test can SIGKILL the
  // agent in that window.
  const bool hold_before_pid_record_;
  SpawnThread spawner_;

  // Serialises Start and Stop; a Stop aborts a Start through abort_start_.
  absl::Mutex op_mu_;
  std::atomic<bool> abort_start_{false};

  mutable absl::Mutex mu_;
  crest::v1::DaemonState state_ ABSL_GUARDED_BY(mu_) = crest::v1::DAEMON_STOPPED;
  std::shared_ptr<Run> run_ ABSL_GUARDED_BY(mu_);
  absl::Time since_ ABSL_GUARDED_BY(mu_);
  uint64_t restarts_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<crest::v1::DaemonFailed> last_failure_ ABSL_GUARDED_BY(mu_);
  std::vector<crest::v1::ConfigOverride> effective_ ABSL_GUARDED_BY(mu_);
  std::optional<MindieConfigView> current_config_ ABSL_GUARDED_BY(mu_);
  StateListener listener_ ABSL_GUARDED_BY(mu_);
};

}  // namespace crest::agent
