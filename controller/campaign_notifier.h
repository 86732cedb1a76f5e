// Delivers campaign snapshots to subscribers (WatchCampaign streams) from its
// own thread, outside every lock of the campaign manager. Changes are
// coalesced per campaign and the snapshot is taken when the thread gets to
// it: a burst of progress updates costs one snapshot, and a slow subscriber
// never holds up scheduling.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "crest/v1/controller.pb.h"

namespace crest::controller {

class CampaignNotifier {
 public:
  // The current view of a campaign (called without the notifier's lock).
  using View = std::function<absl::StatusOr<crest::v1::Campaign>(const std::string& id)>;

  explicit CampaignNotifier(View view) : view_(std::move(view)) {}
  ~CampaignNotifier() { Stop(); }
  CampaignNotifier(const CampaignNotifier&) = delete;
  CampaignNotifier& operator=(const CampaignNotifier&) = delete;

  void Start() {
    thread_ = std::thread([this] { Loop(); });
  }
  // Delivers what is pending, then ends the thread. Idempotent.
  void Stop();

  // `cb(campaign)` after changes, from the notifier's thread; must not block.
  int Subscribe(std::function<void(const crest::v1::Campaign&)> cb);
  // No call of `cb` follows once this returns.
  void Unsubscribe(int id);

  // Campaign `id` changed. Only takes the notifier's own lock, so callers may
  // hold theirs.
  void Changed(const std::string& id);

 private:
  void Loop();

  View view_;
  absl::Mutex mu_;
  std::set<std::string> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;

  absl::Mutex subscribers_mu_;
  int next_subscriber_ ABSL_GUARDED_BY(subscribers_mu_) = 0;
  std::map<int, std::function<void(const crest::v1::Campaign&)>> subscribers_
      ABSL_GUARDED_BY(subscribers_mu_);
};

}  // namespace crest::controller
