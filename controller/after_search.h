// What follows the search of one model, as pure functions of its recorded
// trials (so the scheduler, the report and a restarted controller agree):
// the practice's select-batch calibration at the chosen maxBatchSize, kept
// only when throughput does not fall beyond the noise band, and the search of
// the request rate at the chosen configuration, whose runs change only
// client parameters and so share one daemon. docs/search.md describes both.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "controller/node_effects.h"
#include "controller/search.h"
#include "controller/trial_outcomes.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

// The search's answer for a model with the figures of its runs.
struct ChosenPoint {
  SearchAnswer answer;
  // Mean over the answer's trusted ok runs.
  double first_token_ms = 0;
  double decode_ms = 0;
  double qps = 0;
  double speed_per_client = 0;
  // Relative noise of one run: measured by the search, else its prior.
  double noise = 0.02;
  // The answer's trusted runs with their nodes, and each node's speed as the
  // search estimated it (node_effects.h; 1 where no factor applies): the
  // calibration runs on the answer's nodes first and is compared with the
  // answer within a node.
  std::vector<NodeRun> runs;
  std::map<std::string, NodeFactor> node_factors;
};

// The search's answer for `model` (SearchStrategy::Best over its search
// trials) with the means of its runs; nullopt when no point is usable.
std::optional<ChosenPoint> ChosenPointOf(const crest::v1::CampaignSpec& spec,
                                         const std::string& model, int64_t npu_block_num,
                                         const std::vector<crest::v1::Trial>& trials);

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
                                        const std::map<SlotKey, Slot>& slots, int64_t point);

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

// The next run of a rate search, when one is due.
struct RateRun {
  uint32_t index = 0;  // its place on the ladder (recorded as Trial.repeat)
  uint32_t attempt = 1;
  crest::v1::TrialParameters parameters;
};

// The rate search of `model` at `config` as recorded: rates start, start x
// factor, ... (`start` auto: 0.7 x config.qps); ends at the first rate whose
// throughput does not rise beyond the noise band over the one before, at a
// failed run, or after max_runs. An interrupted or flagged run is made up by
// the next attempt at the same rate, up to limits.max_retries make-ups; when
// none is trusted, the search ends there. `next` (may be null) receives the
// run to start when the search is not over and nothing of it runs.
crest::v1::RateSearchReport EvaluateRateSearch(const crest::v1::CampaignSpec& spec,
                                               const std::string& model,
                                               const std::vector<crest::v1::Trial>& trials,
                                               const FinalConfig& config, double noise,
                                               std::optional<RateRun>* next);

// Whether two trials run the same daemon configuration (every ScheduleConfig
// value), so the second may reuse the first one's daemon.
bool SameServerConfig(const crest::v1::TrialParameters& a, const crest::v1::TrialParameters& b);

}  // namespace crest::controller
