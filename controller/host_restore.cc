#include "controller/host_restore.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "absl/strings/str_cat.h"

#include "controller/search/node_slot.h"

namespace crest::controller {

std::vector<std::string> NodesToRestore(const StoredCampaign& campaign,
                                        const std::vector<const StoredCampaign*>& running) {
  std::vector<std::string> nodes;
  for (const auto& n : campaign.tuned) {
    if (campaign.restored.count(n) != 0) continue;
    bool shared = false;
    for (const StoredCampaign* other : running) shared |= other->tuned.count(n) != 0;
    if (!shared) nodes.push_back(n);
  }
  return nodes;
}

void HostRestorer::Restore(const std::string& campaign_id, std::vector<std::string> nodes,
                           std::function<void(const std::string& node)> restored,
                           std::function<void(const std::vector<std::string>& failed)> done) {
  auto restore = [this, campaign_id, nodes = std::move(nodes), restored = std::move(restored),
                  done = std::move(done)] {
    std::vector<std::string> failed;
    for (const auto& node : nodes) {
      auto agent = registry_->Get(node);
      absl::Status s = absl::UnavailableError("address unknown");
      if (agent && !agent->address().empty()) {
        s = connector_->Connect(node, agent->address())->RestoreHostTuning(call_timeout_).status();
      }
      if (s.ok()) {
        spdlog::info("campaign {}: host settings of {} restored", campaign_id, node);
        restored(node);
      } else {
        spdlog::warn("campaign {}: could not restore host settings of {}: {}", campaign_id, node,
                     s.ToString());
        failed.push_back(node);
      }
    }
    done(failed);
  };
  absl::MutexLock lock(&mu_);
  threads_.emplace_back(std::move(restore));
}

void HostRestorer::StopLeftDaemon(const std::string& node, std::function<void(bool)> done) {
  auto stop = [this, node, done = std::move(done)] {
    auto agent = registry_->Get(node);
    absl::Status s = absl::UnavailableError("address unknown");
    const uint32_t slots = agent ? SlotsOf(agent->slots()) : 1;
    if (agent && !agent->address().empty()) {
      // Every slot's: the node was lost with a job on one or more of them.
      auto client = connector_->Connect(node, agent->address());
      s = absl::OkStatus();
      for (uint32_t slot = 0; slot < slots && s.ok(); ++slot) {
        s = client->StopDaemon(slot, call_timeout_);
      }
    }
    if (s.ok()) {
      spdlog::info("daemon on {} stopped and its config.json put back{} (back after being lost)",
                   node, slots > 1 ? absl::StrCat(", in each of its ", slots, " slots") : "");
    } else {
      spdlog::warn("could not stop the daemon on {} after it came back: {}", node, s.ToString());
    }
    done(s.ok());
  };
  absl::MutexLock lock(&mu_);
  threads_.emplace_back(std::move(stop));
}

void HostRestorer::Join() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
}

}  // namespace crest::controller
