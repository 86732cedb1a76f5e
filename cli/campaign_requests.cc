#include "cli/campaign_requests.h"

#include "absl/strings/str_cat.h"

#include "common/file_util.h"
#include "controller/campaign_io/spec_parser.h"

namespace crest::cli {

absl::StatusOr<crest::v1::CampaignSpec> LoadCampaignSpec(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("-f ", path, ": ", text.status().message()));
  }
  controller::ParsedSpec parsed = controller::ParseAndValidateCampaignSpec(*text);
  if (!parsed.problems.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", controller::FormatProblems(parsed.problems, path)));
  }
  return parsed.spec;
}

absl::Status CheckReportFlags(const std::string& format, const std::string& practice_id,
                              const std::string& model) {
  if (!model.empty() && format != "curve") {
    return absl::InvalidArgumentError(
        absl::StrCat("--model ", model,
                     ": picks the model whose curve file --format curve writes; it needs "
                     "--format curve, not ",
                     format, " (which shows every model)"));
  }
  if (!practice_id.empty() && format != "html") {
    return absl::InvalidArgumentError(
        absl::StrCat("--practice ", practice_id,
                     ": marks the practice's answer on the HTML report's curves; it needs "
                     "--format html, not ",
                     format));
  }
  return absl::OkStatus();
}

}  // namespace crest::cli
