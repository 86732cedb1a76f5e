// A campaign's search.prior (issue 39): each model's profile fitted, at
// creation, to the prior campaign's trusted runs of that model, and the
// peak it predicts for this campaign once the daemon reported npuBlockNum.
// Both are pure functions of records the store keeps (the prior's trials,
// this campaign's spec and probe), so a restarted controller warm-starts
// the same search.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

#include "crest/v1/controller.pb.h"

namespace crest::controller {

// A fit whose leave-one-out error is larger does not follow its runs well
// enough to start a search from (the runs of a daemon the model does not
// describe); the model's search starts cold. A real-time daemon's HTTP and
// scheduling delays alone cost 14% (tests/e2e/profile_fit_e2e_test.cc), a
// daemon the model does not describe 90% (campaign_manager_prior_test.cc).
constexpr double kMaxPriorFitError = 0.25;

struct PriorFit {
  std::string profile_json;   // the fitted mindie-sim profile
  std::string source;         // for the report, e.g. "campaign c1's fit (4 points, ...)"
  int64_t npu_block_num = 0;  // what the prior's daemon reported
};

// `model` of `prior_report` (the prior campaign's report, as ReportToJson
// gives it: one conversion serves every model), run under
// `prior_spec`, fitted from the shipped profile of `model` in
// `share_dir`/profiles. FAILED_PRECONDITION / NOT_FOUND / INVALID_ARGUMENT
// saying why the runs cannot support a fit, or one to trust (above
// kMaxPriorFitError); the model's search then starts cold.
absl::StatusOr<PriorFit> FitPrior(const nlohmann::json& prior_report,
                                  const crest::v1::CampaignSpec& prior_spec,
                                  const crest::v1::ModelSpec& model, const std::string& share_dir);

struct PriorPrediction {
  int64_t peak = 0;                               // maxBatchSize
  std::vector<std::pair<int64_t, double>> curve;  // maxBatchSize -> GenerateSpeed
};

// The noise-free curve over [lo, hi] of the fitted profile for `spec`'s
// workload with `npu_block_num` KV blocks, and the maxBatchSize where it
// peaks. FAILED_PRECONDITION when `spec`'s workload is not one the fit can
// play (another dataset, rate mode).
absl::StatusOr<PriorPrediction> PredictPeak(const std::string& profile_json,
                                            const crest::v1::CampaignSpec& spec,
                                            int64_t npu_block_num, int64_t lo, int64_t hi,
                                            const std::string& share_dir);

}  // namespace crest::controller
