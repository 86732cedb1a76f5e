// Probes the static agents (named by --agents, which never register or
// heartbeat) with GetNodeInfo every interval: a successful probe is their
// heartbeat and refreshes their labels in the registry.
#pragma once

#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#include "controller/agent_client.h"
#include "controller/agent_registry.h"

namespace crest::controller {

class StaticAgentProber {
 public:
  StaticAgentProber(AgentRegistry* registry, AgentConnector* connector, absl::Duration interval,
                    absl::Duration call_timeout)
      : registry_(registry),
        connector_(connector),
        interval_(interval),
        call_timeout_(call_timeout) {}
  ~StaticAgentProber() { Stop(); }
  StaticAgentProber(const StaticAgentProber&) = delete;
  StaticAgentProber& operator=(const StaticAgentProber&) = delete;

  void Start();
  // Waits for a probe in flight. Idempotent; from the owner's thread only.
  void Stop();

 private:
  void Loop();

  AgentRegistry* registry_;
  AgentConnector* connector_;
  absl::Duration interval_;
  absl::Duration call_timeout_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace crest::controller
