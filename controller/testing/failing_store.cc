#include "controller/testing/failing_store.h"

#include "absl/strings/str_cat.h"

namespace crest::controller::testing {

absl::Status FailingStore::Apply(const Batch& batch) {
  if (batch.empty()) return base_->Apply(batch);
  int n = 0;
  {
    absl::MutexLock lock(&mu_);
    n = ++writes_;
  }
  if (fail_at_ > 0 && (n == fail_at_ || (and_after_ && n > fail_at_))) {
    return absl::InternalError(absl::StrCat("disk I/O error (injected at write ", n, ")"));
  }
  return base_->Apply(batch);
}

int FailingStore::writes() const {
  absl::MutexLock lock(&mu_);
  return writes_;
}

}  // namespace crest::controller::testing
