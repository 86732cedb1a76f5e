// The load generator's own health: a small histogram for its lag samples and
// the rule that marks a run "client-bound" (the client, not the server,
// limited it). The thresholds are documented with their reasons in
// docs/crest-bench.md.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/time/time.h"

#include "crest/v1/benchmark.pb.h"

namespace crest::loadgen {

// Client-bound thresholds.
// The event-loop thread used at least this share of one core: it had no
// headroom, so a faster server would not have shown up as more throughput.
inline constexpr double kClientBoundCpu = 0.90;
// The loop was waiting for the network less than 10% of the window: replies
// were ready before the client could take them.
inline constexpr double kClientBoundBusy = 0.90;
// CPU and busy shares are judged over windows at least this long: in shorter
// ones the burst of first sends and the final drain are most of the window.
inline constexpr absl::Duration kClientBoundMinWindow = absl::Seconds(1);
// 1% of the time the loop was at least this late: requests went out (and,
// through libcurl, replies were stamped) that much late; it is a whole decode
// step of a large model.
inline constexpr absl::Duration kClientBoundLoopLagP99 = absl::Milliseconds(20);
// Rate mode: p99 of send lag above the larger of this floor and one mean
// inter-arrival gap (1/rate) means the rate was not held.
inline constexpr absl::Duration kClientBoundSendLagFloor = absl::Milliseconds(2);
// ... and it moved the figure only when the longest send lag is at least this
// share of the window: a server that gets each request at most L late ends
// at most L later, so the throughput moves by at most L / window. Below 1% that
// is inside any run's noise, whatever the schedule looked like (a busy host's
// sends at 2000/s lag a few ms and change nothing: docs/crest-bench.md).
inline constexpr double kClientBoundSendLagShare = 0.01;

// Durations in logarithmic buckets (2^(1/32) wide, about 2% resolution) from
// 1 us to beyond an hour: percentiles of millions of samples in 8 KiB.
class LagHistogram {
 public:
  LagHistogram();

  void Record(absl::Duration d);
  // Records `lag` as a periodic check of period `interval` sees a stall: one
  // sample per check that fell inside it (lag, lag - interval, ...), so a
  // long stall weighs by its length rather than counting once.
  void RecordStall(absl::Duration lag, absl::Duration interval);

  uint64_t count() const { return count_; }
  // Nearest-rank percentile (q in [0, 100]) in milliseconds; 0 when empty.
  double PercentileMs(double q) const;
  double MaxMs() const { return absl::ToDoubleMilliseconds(max_); }

 private:
  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0;
  absl::Duration max_ = absl::ZeroDuration();
};

// Sets health->client_bound and client_bound_reason from the measured fields
// (cpu_utilisation and loop_busy over wall_seconds, loop_lag_p99_ms, and in
// rate mode (request_rate > 0) send_lag_p99_ms, send_lag_max_ms against
// wall_seconds, and slot_waits).
void JudgeClientHealth(double request_rate, crest::v1::ClientHealth* health);

}  // namespace crest::loadgen
