// Small, checked file operations. Every write that matters is atomic
// (temp file + fsync + rename) so a crash never leaves half a file.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace crest {

absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Writes `contents` to `path` via a temporary file in the same directory.
absl::Status WriteFileAtomically(const std::string& path, std::string_view contents,
                                 int mode = 0644);

// Creates `path` and its parents if missing (mode 0755).
absl::Status MakeDirectories(const std::string& path);

}  // namespace crest
