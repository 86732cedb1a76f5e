// The agents the controller knows: static ones from --agents and the ones
// that registered themselves, with liveness. An agent not heard from for
// `missed_heartbeats` intervals is lost; hearing from it again makes it ready.
// Registrations are recorded in the state store before they count, so a
// restarted controller knows every agent that was told it is registered.
// Time comes from a crest::Clock so tests move it by hand.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "common/clock.h"
#include "controller/store.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

// How much faster than real time each node's simulated daemon runs
// (--sim-time-scale): the operator's word, never the agent's.
struct TimeScales {
  double every_node = 0;  // 0: real time
  std::map<std::string, double> per_node;
  // The scale of `node` (0 or 1: results are taken as they are).
  double For(const std::string& node) const;
};

// Parses "K", "NAME=K,NAME=K" or both ("10,node-3=50"); each K > 0.
absl::StatusOr<TimeScales> ParseTimeScales(const std::string& text);

// What a registration may carry: a node name of letters, digits, '-', '.'
// and '_' (at most 253), host:port with a port in [1, 65535], at most 64
// labels (keys of at most 63 characters, values of 256), 32 capabilities and
// 64 limits each, every limit finite with min <= max. INVALID_ARGUMENT names
// the field; nothing of a refused registration is kept.
absl::Status ValidateRegistration(const crest::v1::RegisterAgentRequest& request);

struct RegistryOptions {
  absl::Duration heartbeat_interval = absl::Seconds(2);
  int missed_heartbeats = 3;
  TimeScales time_scales;
};

class AgentRegistry {
 public:
  // `store` records self-registrations (nullptr: they are not recorded).
  AgentRegistry(const Clock* clock, RegistryOptions options, StateStore* store = nullptr);

  // Agents named by --agents: reachable at `address`, probed by the controller.
  void AddStatic(const std::string& name, const std::string& address);
  // Self-registration (or re-registration after a controller restart, or
  // of a restarted agent). FAILED_PRECONDITION for a static (--agents) name:
  // the operator said where that node is. UNAVAILABLE when it cannot be
  // recorded: the agent is then not registered and retries.
  absl::Status Register(const crest::v1::RegisterAgentRequest& request);
  // False when the node is unknown (it must register again).
  bool Heartbeat(const std::string& name);
  // A successful call to the agent counts as a heartbeat; with its NodeInfo,
  // labels are refreshed and its published limits taken over.
  void MarkSeen(const std::string& name, const crest::v1::NodeInfo* info);
  void MarkLost(const std::string& name, const std::string& why);
  // Marks lost every ready agent silent for too long; returns the names.
  std::vector<std::string> CheckLiveness();
  // The trial running in `slot` of the node (empty: none); AgentInfo.running_trial
  // lists those of every slot.
  void SetRunningTrial(const std::string& name, uint32_t slot, const std::string& trial_id);

  std::vector<crest::v1::AgentInfo> List() const;
  std::optional<crest::v1::AgentInfo> Get(const std::string& name) const;
  bool IsReady(const std::string& name) const;
  // Seeds from the store (agents known before a restart; they count as silent
  // since the restart and must be heard from again).
  void Restore(const std::vector<crest::v1::AgentInfo>& agents);

  // Called (without the registry's lock) after any change.
  void SetOnChange(std::function<void()> cb);
  // Called (without the registry's lock) once per ready -> lost transition,
  // with the node's name: every agent ever declared lost is counted
  // (crest_agent_lost_total), even one heard from again a moment later.
  void SetOnLost(std::function<void(const std::string&)> cb);
  const RegistryOptions& options() const { return options_; }

 private:
  struct Entry {
    crest::v1::AgentInfo info;
    absl::Time last_seen;
    std::map<uint32_t, std::string> running;  // slot -> trial
  };
  void Changed();
  void Lost(const std::vector<std::string>& names);
  // Marks `e` heard from now; true when that made it ready.
  bool Touch(Entry* e) const;

  const Clock* clock_;
  RegistryOptions options_;
  StateStore* store_;
  // Held across a registration's write and its entry update, so the store
  // and memory see registrations in the same order; mu_ is not held during
  // the write, so liveness checks and the scheduler do not wait for the disk.
  absl::Mutex register_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> agents_ ABSL_GUARDED_BY(mu_);
  std::function<void()> on_change_;
  std::function<void(const std::string&)> on_lost_;
};

}  // namespace crest::controller
