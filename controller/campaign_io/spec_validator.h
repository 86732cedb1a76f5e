// Semantic checks and defaults for a CampaignSpec, shared by the CLI (before
// sending) and the controller (CreateCampaign refuses with every problem).
#pragma once

#include <vector>

#include "absl/status/status.h"

#include "controller/campaign_io/spec_problem.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

// Defaults the controller applies (documented in docs/campaign-spec.md).
inline constexpr int64_t kDefaultStep = 100;
inline constexpr double kDefaultTolerance = 0.02;
inline constexpr uint32_t kDefaultMaxTrials = 20;
inline constexpr uint32_t kDefaultCacheBlockSize = 128;
inline constexpr uint32_t kDefaultMaxOutputLen = 512;
inline constexpr uint32_t kDefaultRateConcurrency = 1000;
inline constexpr double kDefaultRateFactor = 1.25;
inline constexpr uint32_t kDefaultRateMaxRuns = 6;
inline constexpr uint32_t kDefaultMaxRetries = 2;

// Fills unset fields with their defaults (idempotent).
void ApplySpecDefaults(crest::v1::CampaignSpec* spec);

// Every semantic problem of a spec whose defaults are applied (paths, no lines).
std::vector<SpecProblem> ValidateCampaignSpec(const crest::v1::CampaignSpec& spec);

// INVALID_ARGUMENT listing every problem, or OK.
absl::Status CheckCampaignSpec(const crest::v1::CampaignSpec& spec);

}  // namespace crest::controller
