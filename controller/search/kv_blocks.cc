#include "controller/search/kv_blocks.h"

#include <algorithm>

#include "controller/campaign_io/batch_fill.h"

namespace crest::controller {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return b <= 0 ? 0 : (a + b - 1) / b; }

}  // namespace

BlocksPerRequest BlocksFor(const RequestShape& shape, int64_t cache_block_size) {
  BlocksPerRequest b;
  int64_t in = CeilDiv(shape.avg_input_tokens, cache_block_size);
  b.min = std::max<int64_t>(1, in);
  b.max = std::max<int64_t>(1, in + CeilDiv(shape.max_output_tokens, cache_block_size));
  b.avg = std::max<int64_t>(1, in + CeilDiv(shape.avg_output_tokens, cache_block_size));
  return b;
}

bool NeedsBlockNum(const crest::v1::SearchSpec& search) {
  return search.range_auto() || search.initial_auto();
}

SearchBounds DeriveBounds(const crest::v1::CampaignSpec& spec, int64_t npu_block_num) {
  const auto& s = spec.search();
  BlocksPerRequest blocks =
      BlocksFor(RequestShapeFor(spec.client()), static_cast<int64_t>(s.cache_block_size()));
  SearchBounds b;
  if (s.range_auto()) {
    b.lo = std::max<int64_t>(1, npu_block_num / blocks.max);
    b.hi = std::max<int64_t>(b.lo, npu_block_num / blocks.min);
    // Past requests + 1 the run cannot fill the batch (spec_fill.h).
    if (auto top = LargestFillablePoint(spec); top && b.hi > *top) {
      b.hi = *top;
      b.lo = std::min(b.lo, b.hi);
      b.capped_by_requests = true;
    }
  } else {
    b.lo = s.range_lo();
    b.hi = s.range_hi();
  }
  b.initial = s.initial_auto() ? npu_block_num / blocks.avg : s.initial();
  b.initial = std::clamp(b.initial, b.lo, b.hi);
  return b;
}

int64_t KneeGuess(const crest::v1::CampaignSpec& spec, int64_t npu_block_num) {
  const RequestShape shape = RequestShapeFor(spec.client());
  const auto cbs = static_cast<double>(std::max<uint32_t>(1, spec.search().cache_block_size()));
  // The natural output length, before MaxOutputLen caps it: a cap shortens
  // the long requests, which are the ones that hold the cache longest.
  auto natural = static_cast<double>(shape.avg_output_tokens);
  if (spec.client().avg_output_tokens() == 0 &&
      spec.client().dataset().type() != crest::v1::DATASET_TYPE_SYNTHETIC) {
    natural = kGsm8kNaturalOutputTokens;
  }
  const double live_tokens =
      static_cast<double>(shape.avg_input_tokens) +
      std::min(kLiveOutputShare * natural, static_cast<double>(shape.max_output_tokens));
  return static_cast<int64_t>(static_cast<double>(npu_block_num) / (live_tokens / cbs + 0.5));
}

SearchSpace SearchSpaceFor(const crest::v1::CampaignSpec& spec, int64_t npu_block_num) {
  SearchBounds b = DeriveBounds(spec, npu_block_num);
  SearchSpace space;
  space.lo = b.lo;
  space.hi = b.hi;
  space.initial = b.initial;
  space.step = spec.search().step();
  space.tolerance = spec.search().tolerance();
  space.max_points = spec.search().max_trials();
  space.neighbour_noise = spec.search().neighbour_noise();
  // Without a block count nothing predicts the knee (0: unknown).
  space.knee_guess = npu_block_num > 0 ? std::clamp(KneeGuess(spec, npu_block_num), b.lo, b.hi) : 0;
  return space;
}

}  // namespace crest::controller
