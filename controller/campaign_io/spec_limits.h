// A campaign against what its agents accept. Each agent publishes its limits
// (NodeInfo / RegisterAgent: ScheduleConfig keys and BenchmarkSpec fields);
// an agent that published none is held to MindIE's documented ones
// (common/mindie_limits.h). The controller refuses at submission a spec whose
// derived values no eligible agent accepts, and schedules a point only on an
// agent that accepts it, so no daemon is restarted for a trial the agent
// would refuse anyway.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "controller/campaign_io/spec_problem.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

// What a trial at maxBatchSize `point` sends, search parameters only (no
// calibration): maxPrefillBatchSize = max(1, point / 2), the practice's rule;
// Concurrency = point - 1 in concurrency mode (the practice's rule), the
// client's fixed count in rate mode.
crest::v1::TrialParameters SearchParametersAt(const crest::v1::CampaignSpec& spec, int64_t point);

// Why `agent` would refuse a trial of `spec` at `point` ("" when it accepts):
// names the value, what it derives from and the agent's range.
std::string RefusalAt(const crest::v1::AgentInfo& agent, const crest::v1::CampaignSpec& spec,
                      int64_t point);

// The largest point in [lo, hi] that `agent` accepts, or lo - 1 when it
// accepts none. Every derived value grows with the point, so the accepted
// points of one agent form an interval.
int64_t LargestAcceptedPoint(const crest::v1::AgentInfo& agent, const crest::v1::CampaignSpec& spec,
                             int64_t lo, int64_t hi);

// Problems of model `model_index` of `spec` (defaults applied) against the
// agents eligible for it. With an explicit range, at least one of them must
// accept both ends (and so every point between); with an auto range, the
// fixed client values must be accepted (the range is capped once known).
// `eligible` empty: no eligible agent is known yet, and the documented limits
// stand in for it.
std::vector<SpecProblem> CheckAgainstAgentLimits(const crest::v1::CampaignSpec& spec,
                                                 int model_index,
                                                 const std::vector<crest::v1::AgentInfo>& eligible);

}  // namespace crest::controller
