// The MindIE KV-block arithmetic of the tuning guide: blocks per request and
// the maxBatchSize range and start point from the daemon's npuBlockNum.
#pragma once

#include <cstdint>

#include "controller/campaign_io/request_shape.h"
#include "controller/search/search.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

struct BlocksPerRequest {
  int64_t min = 0;  // Ceil(in / cbs)
  int64_t max = 0;  // Ceil(in / cbs) + Ceil(maxOut / cbs)
  int64_t avg = 0;  // Ceil(in / cbs) + Ceil(avgOut / cbs)
};

BlocksPerRequest BlocksFor(const RequestShape& shape, int64_t cache_block_size);

// The searched interval and start point.
struct SearchBounds {
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t initial = 0;
  // The auto range was capped at LargestFillablePoint (spec_fill.h).
  bool capped_by_requests = false;
};

// Range [Floor(blocks / max), Floor(blocks / min)] (its top capped at the
// largest point the run's requests can fill) and start Floor(blocks / avg), each replaced by the
// spec's explicit value when it has one; the start is clamped into the range. npu_block_num may be
// 0 only when nothing is auto.
SearchBounds DeriveBounds(const crest::v1::CampaignSpec& spec, int64_t npu_block_num);

// Share of its output a running request holds on average, in steady state:
// half of its own length, weighted by length since long requests stay longer
// (E[o^2] / 2E[o] = (1 + cv^2) / 2 of the mean: 0.6 for GSM8K's cv ~0.45),
// plus the requests admitted ahead of their turn; fitted to the simulator's
// knees (search-bench --verbose, docs/search.md).
inline constexpr double kLiveOutputShare = 0.68;
// GSM8K's mean generated length through the reference run (mindie-facts.md).
inline constexpr double kGsm8kNaturalOutputTokens = 346;

// Where the KV-cache knee should lie: the batch whose live contexts (input
// plus kLiveOutputShare of the natural output, at most MaxOutputLen, and
// half a block of rounding each) fill npuBlockNum:
// blocks / ((in + min(share * out, MaxOutputLen)) / cbs + 0.5).
int64_t KneeGuess(const crest::v1::CampaignSpec& spec, int64_t npu_block_num);

// What a model's search runs over: DeriveBounds with the spec's step,
// tolerance and point budget, and KneeGuess clamped into the range.
SearchSpace SearchSpaceFor(const crest::v1::CampaignSpec& spec, int64_t npu_block_num);

// True when range or initial is auto (the daemon must be started once first).
bool NeedsBlockNum(const crest::v1::SearchSpec& search);

}  // namespace crest::controller
