// The agents the controller knows: static ones from --agents and the ones
// that registered themselves, with liveness. An agent not heard from for
// `missed_heartbeats` intervals is lost; hearing from it again makes it ready.
// Time comes from a crest::Clock so tests move it by hand.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "common/clock.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

struct RegistryOptions {
  absl::Duration heartbeat_interval = absl::Seconds(2);
  int missed_heartbeats = 3;
};

class AgentRegistry {
 public:
  AgentRegistry(const Clock* clock, RegistryOptions options);

  // Agents named by --agents: reachable at `address`, probed by the controller.
  void AddStatic(const std::string& name, const std::string& address);
  // Self-registration (or re-registration after a controller restart).
  void Register(const crest::v1::RegisterAgentRequest& request);
  // False when the node is unknown (it must register again).
  bool Heartbeat(const std::string& name);
  // A successful call to the agent counts as a heartbeat; labels refreshed when given.
  void MarkSeen(const std::string& name, const std::map<std::string, std::string>* labels);
  void MarkLost(const std::string& name, const std::string& why);
  // Marks lost every ready agent silent for too long; returns the names.
  std::vector<std::string> CheckLiveness();
  void SetRunningTrial(const std::string& name, const std::string& trial_id);

  std::vector<crest::v1::AgentInfo> List() const;
  std::optional<crest::v1::AgentInfo> Get(const std::string& name) const;
  bool IsReady(const std::string& name) const;
  // Seeds from the store (agents known before a restart; they count as silent
  // since the restart and must be heard from again).
  void Restore(const std::vector<crest::v1::AgentInfo>& agents);

  // Called (without the registry's lock) after any change.
  void SetOnChange(std::function<void()> cb);
  const RegistryOptions& options() const { return options_; }

 private:
  struct Entry {
    crest::v1::AgentInfo info;
    absl::Time last_seen;
  };
  void Changed();
  void Touch(Entry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock* clock_;
  RegistryOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> agents_ ABSL_GUARDED_BY(mu_);
  std::function<void()> on_change_;
};

}  // namespace crest::controller
