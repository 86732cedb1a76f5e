// Helpers for the agent's integration tests: a mindie-sim config.json with
// free ports, a crest-agent process whose bound port is read from its stdout,
// and small waits with deadlines (never sleeps as synchronisation).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "common/listen_port.h"
#include "common/subprocess.h"
#include "common/testing/test_paths.h"

namespace crest::agent::testing {

using ::crest::testing::BinDir;
using ::crest::testing::SourceDir;

// Writes <dir>/conf/config.json from the simulator's template with fresh
// ports, reserved in `ports` (ReserveListenPort): held as long as the test
// holds them, no test running beside it can pick them before the daemon
// binds them. `extra` edits are applied too (path, JSON literal).
absl::StatusOr<std::string> WriteSimConfigJson(
    const std::string& dir, std::vector<PortReservation>& ports,
    const std::vector<std::pair<std::vector<std::string>, std::string>>& extra = {});

// The shipped LLaMA3-8B profile made to print both memory WARNINGs of a
// normal start (model.kv_cache_int8 and model.multimodal; the multimodal one
// needs npuMemSize -1), written to `path`; with `memory_gib` > 0 the card has
// that much memory.
absl::Status WriteProfileWithMemoryWarnings(const std::string& path, double memory_gib = 0);

// A running crest-agent binary.
class AgentProcess {
 public:
  static absl::StatusOr<std::unique_ptr<AgentProcess>> Start(const std::vector<std::string>& args);
  const std::string& address() const { return address_; }
  Subprocess& process() { return *process_; }
  // SIGTERM and wait for the exit; returns the exit code.
  int Terminate();
  // SIGKILL of the agent only (not its daemon's group): a crash.
  void Crash();
  std::string output();

 private:
  std::unique_ptr<Subprocess> process_;
  std::string address_;
  std::string output_;
};

// Reads the child's output until `needle` shows up (or EOF / timeout).
bool ReadUntil(Subprocess& p, const std::string& needle, std::string* out, absl::Duration timeout);

// Polls `condition` every few ms until true or the deadline passes.
bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout);

}  // namespace crest::agent::testing
