#include "loadgen/client_health.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace crest::loadgen {
namespace {

constexpr int kBucketsPerOctave = 32;
constexpr int kOctaves = 36;  // 1 us * 2^36: about 19 hours
constexpr size_t kBuckets = 1 + kBucketsPerOctave * kOctaves;

// Bucket 0 holds everything under 1 us; bucket i > 0 holds
// [2^((i-1)/32), 2^(i/32)) microseconds.
size_t BucketOf(double us) {
  if (us < 1) return 0;
  const auto i = static_cast<size_t>(std::log2(us) * kBucketsPerOctave) + 1;
  return std::min(i, kBuckets - 1);
}

// The geometric middle of bucket i, in microseconds.
double MiddleOf(size_t i) {
  if (i == 0) return 0.5;
  return std::exp2((static_cast<double>(i) - 0.5) / kBucketsPerOctave);
}

}  // namespace

LagHistogram::LagHistogram() : buckets_(kBuckets, 0) {}

void LagHistogram::Record(absl::Duration d) {
  d = std::max(d, absl::ZeroDuration());
  ++buckets_[BucketOf(absl::ToDoubleMicroseconds(d))];
  ++count_;
  max_ = std::max(max_, d);
}

void LagHistogram::RecordStall(absl::Duration lag, absl::Duration interval) {
  Record(lag);
  if (interval <= absl::ZeroDuration()) return;
  for (absl::Duration d = lag - interval; d > absl::ZeroDuration(); d -= interval) Record(d);
}

double LagHistogram::PercentileMs(double q) const {
  if (count_ == 0) return 0;
  // Nearest rank: the smallest value with at least q% of samples at or below it.
  const auto rank = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(q / 100.0 * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen >= rank) return std::min(MiddleOf(i) / 1000.0, MaxMs());
  }
  return MaxMs();
}

void JudgeClientHealth(double request_rate, crest::v1::ClientHealth* health) {
  std::vector<std::string> reasons;
  const bool long_window = health->wall_seconds() >= absl::ToDoubleSeconds(kClientBoundMinWindow);
  if (long_window && health->cpu_utilisation() >= kClientBoundCpu) {
    reasons.push_back(absl::StrFormat("client CPU %.0f%% of one core (threshold %.0f%%)",
                                      100 * health->cpu_utilisation(), 100 * kClientBoundCpu));
  }
  if (long_window && health->loop_busy() >= kClientBoundBusy) {
    reasons.push_back(absl::StrFormat(
        "event loop busy %.0f%% of the window, never waiting for the server (threshold %.0f%%)",
        100 * health->loop_busy(), 100 * kClientBoundBusy));
  }
  const double lag_limit = absl::ToDoubleMilliseconds(kClientBoundLoopLagP99);
  if (health->loop_lag_p99_ms() > lag_limit) {
    reasons.push_back(absl::StrFormat("event-loop lag p99 %.1f ms (threshold %.0f ms)",
                                      health->loop_lag_p99_ms(), lag_limit));
  }
  if (request_rate > 0) {
    const double send_limit =
        std::max(absl::ToDoubleMilliseconds(kClientBoundSendLagFloor), 1000.0 / request_rate);
    const double window_ms = 1000 * health->wall_seconds();
    const double max_share = window_ms > 0 ? health->send_lag_max_ms() / window_ms : 1.0;
    if (health->send_lag_p99_ms() > send_limit && max_share >= kClientBoundSendLagShare) {
      std::string why = absl::StrFormat(
          "sends fell behind the schedule: send lag p99 %.1f ms (threshold %.1f ms, the larger "
          "of %.0f ms and 1/rate), max %.1f ms = %.1f%% of the window (threshold %.0f%%)",
          health->send_lag_p99_ms(), send_limit,
          absl::ToDoubleMilliseconds(kClientBoundSendLagFloor), health->send_lag_max_ms(),
          100 * max_share, 100 * kClientBoundSendLagShare);
      if (health->slot_waits() > 0) {
        absl::StrAppend(&why, "; ", health->slot_waits(),
                        " arrivals waited for a free Concurrency slot (the rate needs more "
                        "requests in flight than Concurrency allows)");
      }
      reasons.push_back(std::move(why));
    }
  }
  health->set_client_bound(!reasons.empty());
  std::string reason;
  for (const std::string& r : reasons) absl::StrAppend(&reason, reason.empty() ? "" : "; ", r);
  health->set_client_bound_reason(reason);
}

}  // namespace crest::loadgen
