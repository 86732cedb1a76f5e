#include "controller/campaign_notifier.h"

namespace crest::controller {

void CampaignNotifier::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

int CampaignNotifier::Subscribe(std::function<void(const crest::v1::Campaign&)> cb) {
  absl::MutexLock lock(&subscribers_mu_);
  subscribers_[next_subscriber_] = std::move(cb);
  return next_subscriber_++;
}

void CampaignNotifier::Unsubscribe(int id) {
  absl::MutexLock lock(&subscribers_mu_);
  subscribers_.erase(id);
}

void CampaignNotifier::Changed(const std::string& id) {
  absl::MutexLock lock(&mu_);
  pending_.insert(id);
}

void CampaignNotifier::Loop() {
  while (true) {
    std::set<std::string> ids;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !pending_.empty() || stopping_;
      };
      mu_.Await(absl::Condition(&ready));
      if (pending_.empty()) return;
      ids.swap(pending_);
    }
    std::vector<crest::v1::Campaign> views;
    for (const auto& id : ids) {
      if (auto view = view_(id); view.ok()) views.push_back(*std::move(view));
    }
    absl::MutexLock lock(&subscribers_mu_);
    for (const auto& c : views) {
      for (auto& [id, cb] : subscribers_) cb(c);
    }
  }
}

}  // namespace crest::controller
