// The campaign manager's writes of state, with LevelDB's rule for background
// errors: the first failed write is kept, and every later write is refused
// with it. Memory is a write-through cache of the store; after a failed
// write the two could only drift apart unnoticed, so nothing more is changed
// until a restart reloads the store, which is the truth.
// Not thread-safe: the manager calls it under its lock.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

#include "controller/store.h"

namespace crest::controller {

class StateWriter {
 public:
  explicit StateWriter(StateStore* store) : store_(store) {}

  // Commits `batch`, the record of `what` ("trial c1-t3"). The first failure
  // is kept, annotated with `what`, and returned; once one is kept, every
  // call returns Refusal() and writes nothing.
  absl::Status Apply(const Batch& batch, absl::string_view what);
  // Writes past a kept error: only to record why a campaign failed, as a
  // best effort.
  absl::Status ApplyDespiteError(const Batch& batch) { return store_->Apply(batch); }

  // The first failure; OK while there was none.
  const absl::Status& error() const { return error_; }
  // FAILED_PRECONDITION naming the first failure: what a refused change gets.
  absl::Status Refusal() const;

 private:
  StateStore* store_;
  absl::Status error_;
};

}  // namespace crest::controller
