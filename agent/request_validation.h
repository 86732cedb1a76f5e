// Checks every RPC argument against the agent's config before anything is
// done: ScheduleConfig keys from the fixed set with their types and ranges,
// governor names the host offers, THP modes, benchmark spec ranges, dataset
// names (never paths). Errors are INVALID_ARGUMENT naming the field and what
// was expected.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "agent/agent_config.h"
#include "agent/config_json_editor.h"
#include "crest/v1/agent.pb.h"
#include "crest/v1/benchmark.pb.h"

namespace crest::agent {

// Validates overrides against `config.limits` and the values in force in
// config.json (cross-checks such as maxPrefillBatchSize <= maxBatchSize) and
// returns them typed, in request order, for BackendConfig.ScheduleConfig.
absl::StatusOr<std::vector<ScheduleValue>> ValidateOverrides(
    const google::protobuf::RepeatedPtrField<crest::v1::ConfigOverride>& overrides,
    const AgentConfig& config, const MindieConfigView& current);

// governor must be one of `available` (empty request fields are fine).
absl::Status ValidateHostTuning(const crest::v1::ApplyHostTuningRequest& request,
                                const std::vector<std::string>& available_governors,
                                bool governor_supported);

// start_timeout, pinning mode (the CPU list itself is checked by ResolvePinning).
absl::Status ValidateStartRequest(const crest::v1::StartDaemonRequest& request);

absl::Status ValidateStopRequest(const crest::v1::StopDaemonRequest& request);

// Enum values, ranges, dataset name and model name of a spec.
absl::Status ValidateBenchmarkSpec(const crest::v1::BenchmarkSpec& spec);

// A dataset name: letters, digits, '_', '-', '.'; no '/' and no "..".
bool IsSafeName(const std::string& name);

// What the agent accepts, as it publishes it in NodeInfo and at registration
// (so the controller refuses a campaign no agent could run): its ScheduleConfig
// keys with the ranges its config allows, and the BenchmarkSpec fields that
// ValidateBenchmarkSpec bounds, keyed by field name.
std::vector<crest::v1::ParameterLimit> PublishedParameterLimits(const AgentConfig& config);
std::vector<crest::v1::ParameterLimit> PublishedBenchmarkLimits();

}  // namespace crest::agent
