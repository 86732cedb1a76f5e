#include "agent/daemon_output.h"

#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace crest::agent {

std::optional<int64_t> ParseKCacheBlocks(const std::string& line) {
  static constexpr std::string_view kMarker = "k_caches[0].shape=torch.Size([";
  size_t pos = line.find(kMarker);
  if (pos == std::string::npos) return std::nullopt;
  size_t start = pos + kMarker.size();
  size_t end = start;
  while (end < line.size() && absl::ascii_isdigit(static_cast<unsigned char>(line[end]))) ++end;
  int64_t n = 0;
  if (end == start || !absl::SimpleAtoi(absl::string_view(line).substr(start, end - start), &n)) {
    return std::nullopt;
  }
  // A cache of no blocks holds no request: not a size the range can follow from.
  if (n <= 0) return std::nullopt;
  return n;
}

bool IsOutOfMemory(const std::string& line) {
  std::string lower = absl::AsciiStrToLower(line);
  return absl::StrContains(lower, "out of memory") || absl::StrContains(lower, "outofmemory");
}

bool IsConfigError(const std::string& line) {
  std::string lower = absl::AsciiStrToLower(line);
  return absl::StrContains(lower, "invalid config") ||
         (absl::StrContains(lower, "error") && absl::StrContains(lower, "config"));
}

}  // namespace crest::agent
