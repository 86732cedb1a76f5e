// Where a Crest binary finds its shipped data (datasets, simulator profiles,
// config templates) and its sibling binaries: <dir of executable>/../share/crest
// and <dir of executable>/, in the build tree and when installed alike.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace crest {

// Directory holding the running executable (from /proc/self/exe).
absl::StatusOr<std::string> ExecutableDir();

// $CREST_SHARE_DIR if set, else <ExecutableDir>/../share/crest.
absl::StatusOr<std::string> ShareDir();

}  // namespace crest
