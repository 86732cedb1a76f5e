// Runs the real mindie-sim binary for tests and benchmarks: writes a config
// from the shipped template with edits, starts the process with its stdout
// captured, waits for log lines with a deadline, signals it, reaps it.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

#include "common/testing/test_paths.h"

namespace crest::sim::testing {

using ::crest::testing::BinDir;
using ::crest::testing::SourceDir;

// The shipped config template ($CREST_SOURCE_DIR/sim/conf/config.json) with
// loopback addresses and port 0 everywhere.
nlohmann::json TestConfig();

class SimProcess {
 public:
  // Starts $CREST_BIN_DIR/mindie-sim --config <dir>/conf/config.json `args`
  // with this process's environment plus MIES_SERVICE_MONITOR_MODE=1 (as the
  // agent starts a daemon), then `env` (whose entries win).
  static absl::StatusOr<std::unique_ptr<SimProcess>> Start(
      const std::string& dir, const nlohmann::json& config, const std::vector<std::string>& args,
      const std::map<std::string, std::string>& env = {});
  ~SimProcess();  // SIGKILLs and reaps the process if still running

  // The first output line containing `text`, waiting up to `timeout_s`.
  std::optional<std::string> WaitForLine(const std::string& text, double timeout_s);
  // Waits for "Daemon start success!" and parses the listening line.
  bool WaitReady(double timeout_s);
  // Exit code after waiting up to `timeout_s` (nullopt: still running).
  std::optional<int> WaitExit(double timeout_s);
  void Signal(int signo);
  std::string Output();

  pid_t pid() const { return pid_; }
  int business_port = 0;
  int management_port = 0;
  int metrics_port = 0;

 private:
  SimProcess() = default;
  void ReadLoop(int fd);

  pid_t pid_ = -1;
  int pidfd_ = -1;
  std::optional<int> exit_code_;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string output_;
  bool eof_ = false;
};

}  // namespace crest::sim::testing
