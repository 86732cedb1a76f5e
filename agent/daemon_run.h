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
#include "agent/startup_log.h"
#include "common/subprocess.h"

namespace crest::agent {
namespace supervisor {

// Log lines kept for a failure's report.
inline constexpr size_t kTailLines = 60;
// How long a wait for the daemon's output, exit or readiness lasts at most.
inline constexpr absl::Duration kPollStep = absl::Milliseconds(100);
// How long a killed daemon may take to be reaped.
inline constexpr absl::Duration kReapWait = absl::Seconds(30);
// How long a daemon that printed a fatal out-of-memory line may take to exit
// before it is killed and the start reported out of memory.
inline constexpr absl::Duration kExitAfterOutOfMemory = absl::Seconds(30);
// The short request that makes a current MindIE-LLM log its serving KV cache
// (its first forward pass): TGI's /generate, one new token.
inline constexpr char kFirstRequest[] =
    R"({"inputs":"Crest reads the serving KV cache.","parameters":{"max_new_tokens":1}})";
inline constexpr absl::Duration kFirstRequestTimeout = absl::Seconds(120);
inline constexpr size_t kFirstRequestMaxBytes = size_t{1} << 20;
// How long the line may take from the daemon's pipe to the watch thread once
// the request was answered (it was printed before the answer).
inline constexpr absl::Duration kFirstRequestLogWait = absl::Seconds(5);

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
  // The start-up log as read so far: npuBlockNum of the serving cache, a
  // fatal out-of-memory or config error line.
  StartupLog startup;
  std::optional<ExitInfo> exit;
  bool done = false;      // the monitor saw the exit and drained the output
  bool stopping = false;  // the agent asked it to stop
};

}  // namespace crest::agent
