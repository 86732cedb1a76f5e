#include "controller/campaign_prior.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include "common/status.h"
#include "controller/campaign_io/fit_workload.h"
#include "controller/campaign_io/report_runs.h"
#include "sim/profile.h"
#include "sim/profile_fit.h"

namespace crest::controller {
namespace {

// The workload `spec`'s benchmark sent, as the fit plays it. The fit knows
// the shipped GSM8K only: another dataset is named on the nodes, not here.
absl::StatusOr<WorkloadShape> ShapeOf(const crest::v1::CampaignSpec& spec,
                                      const std::string& share_dir) {
  const crest::v1::ClientSpec& c = spec.client();
  if ((c.dataset().type() != crest::v1::DATASET_TYPE_UNSPECIFIED &&
       c.dataset().type() != crest::v1::DATASET_TYPE_GSM8K) ||
      !c.dataset().name().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("its client.dataset is not the shipped GSM8K (",
                     c.dataset().ShortDebugString(), "): the fit plays the shipped GSM8K only"));
  }
  if (c.mode() == crest::v1::CLIENT_MODE_RATE) {
    return absl::FailedPreconditionError(
        "its client runs in rate mode: the fit plays the concurrency mode's closed loop only");
  }
  WorkloadShape shape;
  shape.max_output = static_cast<int>(c.max_output_len());
  shape.request_count = static_cast<int>(c.request_count());
  shape.dataset = share_dir + "/datasets/gsm8k";
  if (spec.search().cache_block_size() > 0) {
    shape.cache_block_size = static_cast<int>(spec.search().cache_block_size());
  }
  return shape;
}

// The profile the fit starts from: the shipped one the spec's profile names,
// else the one for the model's name (a path names a file on the nodes, and
// the profile defaults to the model's name).
absl::StatusOr<sim::Profile> StartOf(const crest::v1::ModelSpec& model,
                                     const std::string& share_dir) {
  const std::string dir = share_dir + "/profiles";
  const std::string& p = model.profile();
  if (!p.empty() && p.find('/') == std::string::npos && !p.ends_with(".json")) {
    absl::StatusOr<sim::Profile> named = sim::FindProfile(dir, p, model.name());
    if (named.ok()) return named;
  }
  return sim::FindProfile(dir, "", model.name());
}

}  // namespace

absl::StatusOr<PriorFit> FitPrior(const nlohmann::json& prior_report,
                                  const crest::v1::CampaignSpec& prior_spec,
                                  const crest::v1::ModelSpec& model, const std::string& share_dir) {
  CREST_ASSIGN_OR_RETURN(ReportRuns runs, RunsOfReport(prior_report, model.name()));
  CREST_ASSIGN_OR_RETURN(WorkloadShape shape, ShapeOf(prior_spec, share_dir));
  CREST_ASSIGN_OR_RETURN(sim::Profile start, StartOf(model, share_dir));
  CREST_ASSIGN_OR_RETURN(sim::FitWorkload w, FitWorkloadOf(start, shape));
  w.npu_block_num = runs.npu_block_num;
  if (w.npu_block_num <= 0) {
    return absl::FailedPreconditionError(
        "no trial reported npuBlockNum, so the fit cannot size the KV cache");
  }
  CREST_ASSIGN_OR_RETURN(sim::ProfileFit fit, sim::FitProfile(start, w, runs.points));
  if (fit.timing.leave_one_out_rms && *fit.timing.leave_one_out_rms > kMaxPriorFitError) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the fit of %s to its %d points misses a point it did not see by %.0f%% (leave-one-out, "
        "above %.0f%%): the runs do not follow the model well enough to start from",
        start.name, runs.points.size(), 100 * *fit.timing.leave_one_out_rms,
        100 * kMaxPriorFitError));
  }
  PriorFit out;
  out.profile_json = sim::ProfileJson(fit.profile).dump();
  out.npu_block_num = runs.npu_block_num;
  out.source = absl::StrFormat(
      "campaign %s's fit (%s from %d trusted runs at %d points%s)", runs.campaign, start.name,
      runs.trusted_runs, runs.points.size(),
      fit.timing.leave_one_out_rms
          ? absl::StrFormat(", leave-one-out error %.1f%%", 100 * *fit.timing.leave_one_out_rms)
          : std::string());
  return out;
}

absl::StatusOr<PriorPrediction> PredictPeak(const std::string& profile_json,
                                            const crest::v1::CampaignSpec& spec,
                                            int64_t npu_block_num, int64_t lo, int64_t hi,
                                            const std::string& share_dir) {
  CREST_ASSIGN_OR_RETURN(sim::Profile profile, sim::ParseProfile(profile_json));
  CREST_ASSIGN_OR_RETURN(WorkloadShape shape, ShapeOf(spec, share_dir));
  CREST_ASSIGN_OR_RETURN(sim::FitWorkload w, FitWorkloadOf(profile, shape));
  w.npu_block_num = npu_block_num;
  CREST_ASSIGN_OR_RETURN(sim::PredictedCurve curve,
                         sim::PredictCurve(profile, w, static_cast<int>(lo), static_cast<int>(hi)));
  PriorPrediction out;
  out.peak = curve.peak_max_batch_size;
  for (const auto& [b, speed] : curve.curve) out.curve.emplace_back(b, speed);
  return out;
}

}  // namespace crest::controller
