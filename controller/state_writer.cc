#include "controller/state_writer.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

#include "common/status.h"

namespace crest::controller {

absl::Status StateWriter::Apply(const Batch& batch, absl::string_view what) {
  if (!error_.ok()) return Refusal();
  absl::Status s = store_->Apply(batch);
  if (s.ok()) return s;
  error_ = Annotate(s, absl::StrCat("recording ", what));
  spdlog::error("controller state store failed: {}; no state changes until a restart",
                error_.ToString());
  return error_;
}

absl::Status StateWriter::Refusal() const {
  return absl::FailedPreconditionError(
      absl::StrCat("controller state store failed: ", error_.message(),
                   "; restart the controller once the disk is fixed"));
}

}  // namespace crest::controller
