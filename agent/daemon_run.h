// One daemon that DaemonSupervisor (daemon_supervisor.h) spawned and what
// was seen of it, with the supervisor's timing; internal to
// daemon_supervisor.cc (start, status) and daemon_watch.cc (output, exit, stop).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"

#include "agent/daemon_supervisor.h"
#include "agent/rotating_log.h"
#include "common/subprocess.h"

namespace crest::agent {
namespace supervisor {

// Log lines kept for a failure's report.
inline constexpr size_t kTailLines = 60;
// How long a wait for the daemon's output, exit or readiness lasts at most.
inline constexpr absl::Duration kPollStep = absl::Milliseconds(100);
// How long a killed daemon may take to be reaped.
inline constexpr absl::Duration kReapWait = absl::Seconds(30);

}  // namespace supervisor

struct DaemonSupervisor::Run {
  std::unique_ptr<Subprocess> process;
  pid_t pid = 0;
  std::vector<uint32_t> cpus;
  std::unique_ptr<RotatingLog> log;
  std::thread monitor;
  absl::Time started;
  bool stream_log = false;
  // Guarded by the supervisor's mu_.
  std::deque<std::string> tail;
  std::deque<std::string> pending_lines;
  bool success_seen = false;
  std::optional<int64_t> blocks;
  std::string oom_line;
  std::string config_error_line;
  std::optional<ExitInfo> exit;
  bool done = false;      // the monitor saw the exit and drained the output
  bool stopping = false;  // the agent asked it to stop
};

}  // namespace crest::agent
