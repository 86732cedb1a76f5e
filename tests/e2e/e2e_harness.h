// Real-process harness for the end-to-end tests: spawns Crest binaries from
// $CREST_BIN_DIR in their own process groups, drains their output on a thread
// (so a chatty child never blocks) and lets tests wait for a line with a
// deadline. The test process becomes a child subreaper so daemons orphaned by
// a SIGKILLed agent are reparented to it and can be reaped at the end.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "common/subprocess.h"
#include "common/testing/test_paths.h"

namespace crest::e2e {

using ::crest::testing::BinDir;
using ::crest::testing::SourceDir;

class Process {
 public:
  // Starts `binary` (a name in $CREST_BIN_DIR, or an absolute path) with `args`.
  static absl::StatusOr<std::unique_ptr<Process>> Start(const std::string& binary,
                                                        const std::vector<std::string>& args,
                                                        const std::string& name);
  // Starts `argv` as given (argv[0] a path), e.g. under `ip netns exec`,
  // with `env` added to this process's environment.
  static absl::StatusOr<std::unique_ptr<Process>> StartCommand(
      std::vector<std::string> argv, const std::string& name,
      const std::map<std::string, std::string>& env = {});
  ~Process();  // SIGKILLs the group, reaps, joins the reader
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // Waits until the output contains `needle`; returns the line holding it.
  absl::StatusOr<std::string> WaitForLine(const std::string& needle, absl::Duration timeout);
  // Waits until the output contains any of `needles`; returns the first line
  // holding one.
  absl::StatusOr<std::string> WaitForAnyLine(const std::vector<std::string>& needles,
                                             absl::Duration timeout);
  // Extracts the number after `prefix` in the first line containing it (e.g. a port).
  absl::StatusOr<int> WaitForNumberAfter(const std::string& prefix, absl::Duration timeout);
  std::string output() const;
  void Kill();  // SIGKILL of the whole group
  // SIGTERM, then waits for the exit.
  std::optional<ExitInfo> Terminate(absl::Duration timeout);
  std::optional<ExitInfo> Wait(absl::Duration timeout);
  pid_t pid() const { return proc_->pid(); }

 private:
  Process() = default;
  void Drain();

  std::string name_;
  std::unique_ptr<Subprocess> proc_;
  std::thread reader_;
  mutable absl::Mutex mu_;
  std::string out_ ABSL_GUARDED_BY(mu_);
  bool eof_ ABSL_GUARDED_BY(mu_) = false;
};

struct CommandResult {
  int code = -1;
  std::string output;  // stdout and stderr
};

// Runs `binary args...` to completion (at most `timeout`); `binary` as in Process::Start.
CommandResult RunBinary(const std::string& binary, const std::vector<std::string>& args,
                        absl::Duration timeout = absl::Seconds(30));
// Runs `argv` as given (argv[0] a path) to completion.
CommandResult RunArgv(std::vector<std::string> argv, absl::Duration timeout = absl::Seconds(30));

// Marks this process a child subreaper (once).
void BecomeSubreaper();
// SIGKILLs and reaps every remaining child of this process (orphaned
// daemons included); returns how many there were.
int KillAllChildren();

}  // namespace crest::e2e
