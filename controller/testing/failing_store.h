// A StateStore over a real one (SQLite in a temp dir, in tests) whose Nth
// write fails, and with `and_after` every later write too: a disk that fails
// at a chosen moment, or a full one. Writes of nothing (empty batches) do
// not count, as the SQLite store does not write them either.
#pragma once

#include "absl/synchronization/mutex.h"

#include "controller/store.h"

namespace crest::controller::testing {

class FailingStore final : public StateStore {
 public:
  // `fail_at`: the 1-based write that fails (0: none).
  FailingStore(StateStore* base, int fail_at, bool and_after = false)
      : base_(base), fail_at_(fail_at), and_after_(and_after) {}

  absl::Status Apply(const Batch& batch) override;
  absl::StatusOr<Snapshot> Load() override { return base_->Load(); }
  absl::StatusOr<int64_t> NextCampaignNumber() override { return base_->NextCampaignNumber(); }

  // Writes asked for so far (failed ones included).
  int writes() const;

 private:
  StateStore* base_;
  const int fail_at_;
  const bool and_after_;
  mutable absl::Mutex mu_;
  int writes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace crest::controller::testing
