#include "sim/curve_replay.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace crest::sim {
namespace {

// GSM8K's test split: the run a file's preemption count is taken over.
constexpr double kGsm8kRequests = 1319;
// Longest prompt the scheduler's blocks must hold (tokens).
constexpr int64_t kLongestPrompt = 8192;

}  // namespace

CurveReplay PlanCurveReplay(const crest::ThroughputCurve& curve, const SimConfig& config) {
  CurveReplay replay;
  const int64_t b = config.max_batch_size;
  const std::optional<double> target = curve.SpeedAt(b);
  if (!target || *target <= 0) {
    replay.infeasible = absl::StrCat("maxBatchSize ", b, " is outside the points of curve ",
                                     curve.name, " [", curve.points.front().max_batch_size, ", ",
                                     curve.points.back().max_batch_size, "]");
    return replay;
  }
  replay.seconds_per_token = 1 / *target;
  const int64_t block = std::max(1, config.cache_block_size);
  replay.scheduler_blocks =
      (b + 1) * ((kLongestPrompt + config.max_iter_times + block - 1) / block + 1);
  if (const std::optional<int64_t> count = curve.PreemptionsAt(b)) {
    const double output = static_cast<double>(std::min<int64_t>(
        curve.avg_output_tokens > 0 ? curve.avg_output_tokens : 346, config.max_iter_times));
    replay.preemptions_per_token =
        static_cast<double>(*count) / (kGsm8kRequests * std::max(1.0, output));
  }
  return replay;
}

}  // namespace crest::sim
