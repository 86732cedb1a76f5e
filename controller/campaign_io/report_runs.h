// What a profile fit (`crest profile fit`, a campaign's search.prior) reads
// from a campaign report (the JSON of `crest campaign report --format
// json`): one model's trusted search runs, grouped by configuration into
// the mean figures the fit weighs by runs.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "sim/profile_fit.h"

namespace crest::controller {

struct ReportRuns {
  std::string campaign;  // the report's id
  std::string model;
  std::vector<sim::MeasuredPoint> points;  // by maxBatchSize, then the rest
  int64_t npu_block_num = 0;               // the last one a trial reported; 0: none
  int trusted_runs = 0;
  int left_out_runs = 0;  // not ok, flagged, calibration or rate-search runs
};

// `model` of `report` (empty: its only model). INVALID_ARGUMENT naming the
// field for a report that is not one; NOT_FOUND naming the models; and
// FAILED_PRECONDITION when no run of the model can be trusted.
absl::StatusOr<ReportRuns> RunsOfReport(const nlohmann::json& report, const std::string& model);

}  // namespace crest::controller
