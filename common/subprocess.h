// Process-spawning seam: starts a child in its own process group with an
// explicit argv, environment, working directory and CPU affinity (set in the
// child before exec, as taskset does), its stdout and stderr captured through
// one pipe, optionally a parent-death signal and a step the parent runs while
// the child waits before exec; signals the whole group; waits with a timeout.
// Nothing here goes through a shell.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace crest {

struct SpawnOptions {
  // argv[0] is the program: an absolute or relative path, never searched on
  // PATH unless search_path is set.
  std::vector<std::string> argv;
  bool search_path = false;
  // The child's environment is the parent's (when inherit_env) plus `env`,
  // whose entries win.
  bool inherit_env = true;
  std::map<std::string, std::string> env;
  // Working directory of the child; empty keeps the parent's.
  std::string cwd;
  // CPUs the child may run on; empty leaves the affinity alone.
  std::vector<uint32_t> cpus;
  // Capture stdout+stderr in a pipe (output_fd()); else they go to /dev/null.
  bool capture_output = true;
  // Signal the kernel sends the child when the thread that forked it ends
  // (PR_SET_PDEATHSIG, set before exec; a parent already gone when it is set
  // makes the child exit at once); 0: none. Linux ties it to the forking
  // *thread*: spawn from one that lives as long as the process (SpawnThread).
  int parent_death_signal = 0;
  // Run in the parent with the child's pid while the child waits before exec
  // (nothing of the program has run yet), e.g. to record the pid durably
  // first. An error kills and reaps the child and is what Spawn returns; if
  // the parent dies meanwhile the child exits without exec.
  std::function<absl::Status(pid_t)> before_exec;
};

// How a child ended: exit code, or 128 + signal number when killed.
struct ExitInfo {
  int code = 0;
  bool signaled = false;
  int signal = 0;
};

class Subprocess {
 public:
  // Forks and execs. Errors from the child before exec (chdir, affinity,
  // exec itself) are reported here, naming the step: the affinity step fails
  // with FAILED_PRECONDITION "setting CPU affinity ...", exec with NOT_FOUND
  // or PERMISSION_DENIED.
  static absl::StatusOr<std::unique_ptr<Subprocess>> Spawn(const SpawnOptions& options);

  // Kills the group (SIGKILL) and reaps the child if it still runs.
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // The process group id (equal to pid()).
  pid_t pgid() const { return pid_; }
  // Read end of the output pipe (non-blocking), or -1 without capture. Owned.
  int output_fd() const { return output_fd_; }
  // A pidfd that becomes readable when the child exits, or -1.
  int pid_fd() const { return pid_fd_; }

  // Sends `sig` to every process of the child's group.
  absl::Status SignalGroup(int sig);

  // Waits up to `timeout` for the child to exit and reaps it. Returns the
  // exit info, or std::nullopt if it still runs. Thread-compatible: call
  // from one thread at a time.
  std::optional<ExitInfo> WaitFor(absl::Duration timeout);
  // The exit info once reaped.
  std::optional<ExitInfo> exit_info() const { return exit_; }

  // Reads what is available on the output pipe without blocking; appends to
  // `out`. Returns false once the pipe reached end of file.
  bool ReadAvailable(std::string* out);

 private:
  Subprocess(pid_t pid, int output_fd, int pid_fd)
      : pid_(pid), output_fd_(output_fd), pid_fd_(pid_fd) {}
  std::optional<ExitInfo> TryReap();

  pid_t pid_;
  int output_fd_;
  int pid_fd_;
  std::optional<ExitInfo> exit_;
};

// Forks every child from one thread that lives as long as this object, so
// that a parent_death_signal fires when the process dies and not when a
// short-lived (RPC) thread that asked for the spawn ends.
class SpawnThread {
 public:
  SpawnThread();
  ~SpawnThread();
  SpawnThread(const SpawnThread&) = delete;
  SpawnThread& operator=(const SpawnThread&) = delete;

  // Subprocess::Spawn(options) run on the thread; blocks until it returns.
  absl::StatusOr<std::unique_ptr<Subprocess>> Spawn(const SpawnOptions& options);

 private:
  void Loop();

  absl::Mutex call_mu_;  // one request at a time
  absl::Mutex mu_;
  const SpawnOptions* request_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::optional<absl::StatusOr<std::unique_ptr<Subprocess>>> reply_ ABSL_GUARDED_BY(mu_);
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// True while any process of group `pgid` exists (kill(-pgid, 0)).
bool ProcessGroupExists(pid_t pgid);

// Runs argv to completion (output captured, at most `timeout`), returning its
// exit info and output. Used for short helper tools (npu-smi, cpupower).
struct CommandOutput {
  ExitInfo exit;
  std::string output;
};
absl::StatusOr<CommandOutput> RunCommand(const SpawnOptions& options, absl::Duration timeout);

// Finds `name` on $PATH; empty when absent.
std::string FindOnPath(const std::string& name);

}  // namespace crest
