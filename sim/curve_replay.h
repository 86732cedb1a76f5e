// mindie-sim --curve FILE: the daemon serves a curve file (common/curve_file.h)
// instead of its profile's KV-cache knee. A step takes time in proportion to
// the tokens it generates, so that MindIE's benchmark (Concurrency =
// maxBatchSize - 1) measures the file's GenerateSpeed at the configured
// maxBatchSize within the noise, whatever its requests; the
// preemption counter follows the file (none published where it has none);
// the block count logged is the file's; outside its points the daemon does
// not start (NPU out of memory at warm-up), as a real one past its memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

#include "common/curve_file.h"
#include "sim/config.h"

namespace crest::sim {

struct CurveReplay {
  // Outside the file's points: why the daemon does not start.
  std::optional<std::string> infeasible;
  // Seconds a step takes per token it generates: a full batch generates the
  // file's GenerateSpeed, whatever the requests' lengths and count.
  double seconds_per_token = 0;
  // Preemptions counted per generated token (the file's count over a GSM8K
  // run of its average output); nullopt: the counter is not published.
  std::optional<double> preemptions_per_token;
  // KV blocks the scheduler gets: enough that it never preempts (the file's
  // counter stands in for its own).
  int64_t scheduler_blocks = 0;
};

// The replay of `curve` at `config`'s maxBatchSize.
CurveReplay PlanCurveReplay(const crest::ThroughputCurve& curve, const SimConfig& config);

}  // namespace crest::sim
