#include "common/cpu_list.h"

#include <algorithm>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace crest {

absl::StatusOr<std::vector<uint32_t>> ParseCpuList(absl::string_view text) {
  std::vector<uint32_t> cpus;
  absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  if (trimmed.empty()) return cpus;
  constexpr uint32_t kMaxCpu = 65535;
  // Marks, not a list: a hostile "0-65535,0-65535,..." must cost at most one
  // entry per CPU id, never one per listed id.
  std::vector<bool> listed;
  for (absl::string_view part : absl::StrSplit(trimmed, ',')) {
    part = absl::StripAsciiWhitespace(part);
    std::pair<absl::string_view, absl::string_view> range =
        absl::StrSplit(part, absl::MaxSplits('-', 1));
    uint32_t lo = 0;
    uint32_t hi = 0;
    if (!absl::SimpleAtoi(range.first, &lo) ||
        (!range.second.empty() && !absl::SimpleAtoi(range.second, &hi)) ||
        (range.second.empty() && part.find('-') != absl::string_view::npos)) {
      return absl::InvalidArgumentError(
          absl::StrCat("CPU list \"", text, "\": \"", part, "\" is not N or N-M"));
    }
    if (range.second.empty()) hi = lo;
    if (hi < lo) {
      return absl::InvalidArgumentError(
          absl::StrCat("CPU list \"", text, "\": range ", part, " runs backwards"));
    }
    if (hi > kMaxCpu) {
      return absl::InvalidArgumentError(
          absl::StrCat("CPU list \"", text, "\": CPU ", hi, " is above ", kMaxCpu));
    }
    if (listed.size() <= hi) listed.resize(hi + 1, false);
    std::fill(listed.begin() + lo, listed.begin() + hi + 1, true);
  }
  for (uint32_t c = 0; c < listed.size(); ++c) {
    if (listed[c]) cpus.push_back(c);
  }
  return cpus;
}

std::string FormatCpuList(const std::vector<uint32_t>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    if (j == i) {
      absl::StrAppend(&out, cpus[i]);
    } else {
      absl::StrAppend(&out, cpus[i], "-", cpus[j]);
    }
    i = j + 1;
  }
  return out;
}

}  // namespace crest
