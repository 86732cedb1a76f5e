// What each daemon slot of an agent runs (slots.h plans which NPUs and CPUs):
// its state folder, its working copy of config.json with its own ports and
// cards, and the agent config its DaemonSupervisor is built from. An agent
// without `slots:` is one slot that runs the configured daemon on the
// original config.json, exactly as before slots.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "agent/agent_config.h"
#include "agent/slots.h"
#include "common/listen_port.h"

namespace crest::agent {

struct SlotRuntime {
  SlotLayout layout;
  AgentConfig config;     // config_json: the slot's working copy (a lone slot: the original)
  std::string state_dir;  // pid record, config.json backup, daemon log
  int port = 0;           // 0: as config.json says (a lone slot)
  int management_port = 0;
  int metrics_port = 0;
  // The three ports, held while the slot lives (ReserveListenPort) when the
  // daemon is the built-in mindie-sim, whose listener shares them; a real
  // daemon may bind without SO_REUSEADDR, so its ports are only picked.
  std::vector<PortReservation> reserved;
};

// The folder of slot `index`'s state under the agent's.
std::string SlotStateDir(const std::string& state_dir, uint32_t index);

// One SlotRuntime per slot of `plan`; with `config.slots` set, writes every
// working copy (from the original config.json, the backup a crashed agent
// left if any) with the slot's npuDeviceIds, worldSize and three free ports.
// Without, the lone slot of before. No copy is written until every one is
// ready (ports picked, edits applied).
absl::StatusOr<std::vector<SlotRuntime>> PrepareSlots(const AgentConfig& config,
                                                      const SlotPlan& plan,
                                                      const std::string& state_dir);

}  // namespace crest::agent
