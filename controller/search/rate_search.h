// The search of the request rate at a model's final configuration (the
// practice's rate mode), as a pure function of the recorded trials: its runs
// change only client parameters and so share one daemon. docs/search.md
// describes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "controller/search/calibration.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

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
