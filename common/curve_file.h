// A throughput curve file: GenerateSpeed (and the preemption counter) of a
// serving engine over maxBatchSize, measured or built. One format, a
// contract (docs/search.md, "Curve files"), read by search-bench --curve and
// mindie-sim --curve and written by `crest campaign report --format curve`,
// so a real cluster's campaign becomes a replayable test case.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace crest {

struct CurvePoint {
  int64_t max_batch_size = 0;
  double generate_speed = 0;  // token/s, the benchmark's GenerateSpeed
  // The daemon's preemption count over the run; nullopt: it publishes none
  // here (a count of 0 is a counter that says 0).
  std::optional<int64_t> preemptions;
};

struct ThroughputCurve {
  std::string name;
  std::string source;     // where it was measured, or how it was built
  std::string rationale;  // what shape it tests and why (optional)
  // What the daemon reports; nullopt: it reports none (the range must be given).
  std::optional<int64_t> npu_block_num;
  int64_t cache_block_size = 128;
  int64_t avg_input_tokens = 0;
  int64_t avg_output_tokens = 0;
  int64_t max_output_len = 0;
  // The searched range; nullopt: the auto range from the block count.
  std::optional<std::pair<int64_t, int64_t>> range;
  // The practice's step (default 100, as the guide's).
  int64_t step = 100;
  // Relative run-to-run noise of one benchmark (AR(1), sim/simulate.h).
  double noise_cv = 0.02;
  // Strictly increasing in max_batch_size; at least one.
  std::vector<CurvePoint> points;

  // Linear between the points; nullopt outside them (the daemon fails to
  // start there: infeasible).
  std::optional<double> SpeedAt(int64_t max_batch_size) const;
  // Linear between the points, rounded; nullopt outside them or where a
  // neighbouring point publishes no counter.
  std::optional<int64_t> PreemptionsAt(int64_t max_batch_size) const;
  // The highest GenerateSpeed over [lo, hi] and where (piecewise linear: at
  // a point or an end); nullopt when no point of [lo, hi] is feasible.
  std::optional<std::pair<int64_t, double>> PeakWithin(int64_t lo, int64_t hi) const;
};

// Parses a curve file's JSON text; `where` names it in errors, which say
// which field is wrong and what was expected.
absl::StatusOr<ThroughputCurve> ParseCurve(absl::string_view json_text, absl::string_view where);
absl::StatusOr<ThroughputCurve> ReadCurveFile(const std::string& path);
// The curve as a file's text (ParseCurve reads it back the same).
std::string CurveJson(const ThroughputCurve& curve);

}  // namespace crest
