#include "common/status.h"

#include "absl/strings/str_cat.h"

namespace crest {

absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

std::string ClipForMessage(absl::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  return absl::StrCat(text.substr(0, max), "...(", text.size(), " bytes)");
}

}  // namespace crest
