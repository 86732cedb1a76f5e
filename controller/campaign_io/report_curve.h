// `crest campaign report ID --format curve`: one model of a campaign as a
// curve file (common/curve_file.h), the mean GenerateSpeed of its trusted
// search runs per maxBatchSize with the preemptions the daemon published,
// so a real cluster's campaign becomes a case search-bench and mindie-sim
// replay.
#pragma once

#include <string>

#include "absl/status/statusor.h"

#include "common/curve_file.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

// `model` of the report (empty: the only model; an error naming the models
// when there are several). `campaign` (GetCampaign) gives the request shape
// and block size of its spec; without it GSM8K's are assumed.
absl::StatusOr<crest::ThroughputCurve> CurveOfModel(const crest::v1::CampaignReport& report,
                                                    const crest::v1::Campaign* campaign,
                                                    const std::string& model);

}  // namespace crest::controller
