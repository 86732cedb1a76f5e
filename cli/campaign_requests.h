// What `crest campaign` sends the controller, checked before any call: the
// spec of `submit` (parsed and validated here first, every problem with its
// line; the controller checks it again) and the flags of `report`.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "crest/v1/controller.pb.h"

namespace crest::cli {

// The campaign spec in the YAML file at `path`, defaults filled in; the
// error names the file, and lists every problem with its line.
absl::StatusOr<crest::v1::CampaignSpec> LoadCampaignSpec(const std::string& path);

// --practice marks another campaign's answer on the HTML report only.
// --practice only with --format html; --model only with --format curve.
absl::Status CheckReportFlags(const std::string& format, const std::string& practice_id,
                              const std::string& model = "");

}  // namespace crest::cli
