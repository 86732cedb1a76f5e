// Puts back the host settings (governor, THP) of the nodes a campaign tuned,
// through their agents, which keep the previous values. Each campaign end
// restores on its own thread, so a slow or dead agent holds up nothing else;
// the campaign manager records each restored node and then ends the campaign.
#pragma once

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "controller/agent_client.h"
#include "controller/agent_registry.h"
#include "controller/store.h"

namespace crest::controller {

// The nodes of `campaign` to restore now: tuned by it, not restored yet, and
// not tuned by any of `running` (the other campaigns still running), which
// restore them at their own end.
std::vector<std::string> NodesToRestore(const StoredCampaign& campaign,
                                        const std::vector<const StoredCampaign*>& running);

class HostRestorer {
 public:
  HostRestorer(AgentRegistry* registry, AgentConnector* connector, absl::Duration call_timeout)
      : registry_(registry), connector_(connector), call_timeout_(call_timeout) {}
  ~HostRestorer() { Join(); }
  HostRestorer(const HostRestorer&) = delete;
  HostRestorer& operator=(const HostRestorer&) = delete;

  // On a new thread: restores `nodes` of `campaign_id` in order, calls
  // `restored(node)` after each success, then `done(nodes that failed)`.
  void Restore(const std::string& campaign_id, std::vector<std::string> nodes,
               std::function<void(const std::string& node)> restored,
               std::function<void(const std::vector<std::string>& failed)> done);
  // On a new thread: stops the daemon that a trial interrupted while `node`
  // was unreachable may have left running (the agent then puts config.json
  // back), then calls `done(stopped)`.
  void StopLeftDaemon(const std::string& node, std::function<void(bool stopped)> done);
  // Waits for every restore started so far.
  void Join();

 private:
  AgentRegistry* registry_;
  AgentConnector* connector_;
  absl::Duration call_timeout_;
  absl::Mutex mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace crest::controller
