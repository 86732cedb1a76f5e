// Whether the requests of a run can fill the batch a point asks for. In
// concurrency mode a trial at maxBatchSize B runs Concurrency B - 1 clients;
// with fewer requests than that in the whole run, the batch never fills, and
// the point says nothing about maxBatchSize. Refused at submission when the
// range is explicit; an auto range (known only once npuBlockNum is) is capped
// at the largest fillable point. Few requests per client are allowed (the
// practice's own GSM8K run has 1319 for 1000 clients) but said.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "controller/campaign_io/spec_problem.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

// Measured requests per benchmark run: client.request_count (crest-bench
// repeats the dataset past its end), else the dataset's size when Crest knows
// it (GSM8K: 1319); nullopt when unknown (a jsonl dataset without a count).
std::optional<int64_t> RequestsPerRun(const crest::v1::ClientSpec& client);

// The largest maxBatchSize whose Concurrency (B - 1) the run's requests can
// fill: requests + 1. nullopt in rate mode (the clients are fixed) or when
// the request count is unknown.
std::optional<int64_t> LargestFillablePoint(const crest::v1::CampaignSpec& spec);

// The refusal (defaults applied): an explicit range reaching above
// LargestFillablePoint, naming the models, the range, the request count and
// that point.
std::vector<SpecProblem> CheckBatchCanFill(const crest::v1::CampaignSpec& spec);

// What is allowed but worth saying at submission (the CLI prints them, the
// campaign stores them): fewer than kFewRequestsPerClient requests per client
// at the top of an explicit range; an auto range capped by the request count.
std::vector<std::string> SpecWarnings(const crest::v1::CampaignSpec& spec);

}  // namespace crest::controller
