// The practice's select-batch calibration at the search's answer, as pure
// functions of the recorded trials (so the scheduler, the report and a
// restarted controller agree): supportSelectBatch with the first-token and
// decode times measured at the answer, kept only when throughput does not
// fall beyond the noise band. docs/search.md describes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "controller/search/chosen_point.h"
#include "controller/search/trial_outcomes.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

// The server configuration of the calibration runs: the chosen point's search
// parameters with supportSelectBatch and the select-batch times from its
// measured latencies.
crest::v1::TrialParameters CalibrationParameters(const crest::v1::CampaignSpec& spec,
                                                 const ChosenPoint& chosen);

// Trusted calibrated runs a model gets: the spec's repeats (at least 1).
uint32_t CalibrationRuns(const crest::v1::CampaignSpec& spec);
// Calibrated runs at most, flagged ones included: a run the trust checks
// flag (a client-bound crest-bench) measured nothing of the server, so the
// next repeat makes it up, up to limits.max_retries of them.
uint32_t CalibrationRunsAtMost(const crest::v1::CampaignSpec& spec);

// The calibration's repeats at `point`, walked as both the verdict and the
// planner walk them (WalkRepeats): in order, within CalibrationRunsAtMost,
// each repeat that is trusted or may yet be (running, not run, failed) counts
// until CalibrationRuns are counted; every flagged one is passed over.
WalkedRepeats CountedCalibrationRepeats(const crest::v1::CampaignSpec& spec,
                                        const std::map<RepeatKey, RepeatOutcome>& outcomes,
                                        int64_t point);

// The calibration of `model` as recorded (spec.calibrate() set): "skipped"
// in text mode or without latencies, "pending" while runs are missing (a
// flagged run is made up by the next repeat, CalibrationRunsAtMost),
// "dropped" when a calibrated run failed, every one was flagged, or the
// calibrated mean fell below the search's by more than the noise band, else
// "kept". Before and after are compared with each run divided by its node's
// factor (a calibrated run on a faster node than the answer's would hide a
// fall); the figures reported are the measured ones.
crest::v1::CalibrationReport EvaluateCalibration(const crest::v1::CampaignSpec& spec,
                                                 const std::string& model,
                                                 const std::vector<crest::v1::Trial>& trials,
                                                 const ChosenPoint& chosen);

// The configuration a model ends with: the chosen point's, with the
// calibration when it was kept; its mean throughput, runs and QPS.
struct FinalConfig {
  crest::v1::TrialParameters parameters;
  double generate_speed = 0;
  double generate_speed_per_client = 0;
  double qps = 0;
  uint32_t runs = 0;
  bool calibrated = false;
};
FinalConfig FinalConfigOf(const crest::v1::CampaignSpec& spec, const ChosenPoint& chosen,
                          const crest::v1::CalibrationReport* calibration,
                          const std::vector<crest::v1::Trial>& trials, const std::string& model);

}  // namespace crest::controller
