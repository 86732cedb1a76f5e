// The controller's durable state: campaigns, trials with their results, per
// model search state, the nodes each campaign tuned, and known agents, in
// SQLite (WAL) under --state-dir. Every change is one transaction; a trial
// that reached a final status is never changed or deleted again, so nothing
// recorded is lost, whatever moment the controller is killed at.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

#include "controller/search/campaign_records.h"
#include "crest/v1/controller.pb.h"

struct sqlite3;

namespace crest::controller {

struct Batch {
  std::vector<crest::v1::Campaign> campaigns;  // upserted (models progress not stored)
  std::vector<crest::v1::Trial> trials;        // upserted; final ones are immutable
  std::vector<std::pair<CampaignModel, ModelState>> models;
  std::vector<std::pair<std::string, std::string>> tuned;     // (campaign, node) tuned
  std::vector<std::pair<std::string, std::string>> restored;  // (campaign, node) restored
  std::vector<crest::v1::AgentInfo> agents;
  bool empty() const {
    return campaigns.empty() && trials.empty() && models.empty() && tuned.empty() &&
           restored.empty() && agents.empty();
  }
};

struct Snapshot {
  std::vector<StoredCampaign> campaigns;  // in creation order
  std::vector<crest::v1::AgentInfo> agents;
};

// What the campaign manager and the agent registry read and write: the
// SQLite Store below in production; tests wrap it to make a write fail.
class StateStore {
 public:
  virtual ~StateStore() = default;
  // All of `batch` or nothing.
  virtual absl::Status Apply(const Batch& batch) = 0;
  virtual absl::StatusOr<Snapshot> Load() = 0;
  // Next number for campaign ids (1 + campaigns ever created).
  virtual absl::StatusOr<int64_t> NextCampaignNumber() = 0;
};

class Store final : public StateStore {
 public:
  // The schema version this build writes; older files are migrated on Open.
  static constexpr int kSchemaVersion = 2;

  // Opens (creating if needed) <dir>/controller.db and migrates it. A file
  // written by a newer build is refused.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& dir);
  // Same, stopping at `version` (tests of migrations).
  static absl::StatusOr<std::unique_ptr<Store>> OpenAtVersionForTest(const std::string& dir,
                                                                     int version);
  ~Store() override;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // All of `batch` or nothing. FAILED_PRECONDITION when it would change a
  // trial that is final already.
  absl::Status Apply(const Batch& batch) override;
  absl::StatusOr<Snapshot> Load() override;
  absl::StatusOr<int> SchemaVersion();
  absl::StatusOr<int64_t> NextCampaignNumber() override;

  const std::string& path() const { return path_; }

 private:
  Store(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  absl::Status Exec(const std::string& sql);
  absl::Status Migrate(int target);

  absl::Mutex mu_;
  sqlite3* db_;
  std::string path_;
};

}  // namespace crest::controller
