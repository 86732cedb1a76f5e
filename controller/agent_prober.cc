#include "controller/agent_prober.h"

#include <algorithm>

namespace crest::controller {

void StaticAgentProber::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void StaticAgentProber::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void StaticAgentProber::Loop() {
  while (!stop_.WaitForNotificationWithTimeout(interval_)) {
    for (const auto& agent : registry_->List()) {
      if (!agent.static_()) continue;
      auto client = connector_->Connect(agent.node_name(), agent.address());
      auto info = client->GetNodeInfo(std::min(call_timeout_, absl::Seconds(3)));
      if (info.ok()) registry_->MarkSeen(agent.node_name(), &*info);
    }
  }
}

}  // namespace crest::controller
