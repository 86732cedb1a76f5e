// CPU lists in the notation of lscpu and sysfs ("0-23,48-71").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace crest {

// Parses "0-3,8,10-11" into ascending, de-duplicated CPU ids. Empty or
// whitespace-only input gives an empty list.
absl::StatusOr<std::vector<uint32_t>> ParseCpuList(absl::string_view text);

// Formats ascending ids compactly: {0,1,2,3,8} -> "0-3,8".
std::string FormatCpuList(const std::vector<uint32_t>& cpus);

}  // namespace crest
