#include "loadgen/run_statistics.h"

#include <algorithm>
#include <cmath>

#include "google/protobuf/util/time_util.h"

namespace crest::loadgen {

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double rank = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

crest::v1::LatencyStats MakeStats(std::vector<double> samples) {
  crest::v1::LatencyStats stats;
  if (samples.empty()) return stats;
  std::sort(samples.begin(), samples.end());
  double sum = 0;
  for (double v : samples) sum += v;
  stats.set_average_ms(sum / static_cast<double>(samples.size()));
  stats.set_p50_ms(Percentile(samples, 50));
  stats.set_p90_ms(Percentile(samples, 90));
  stats.set_p99_ms(Percentile(samples, 99));
  stats.set_max_ms(samples.back());
  stats.set_min_ms(samples.front());
  stats.set_samples(samples.size());
  return stats;
}

crest::v1::BenchmarkResult ComputeResult(const std::vector<RequestRecord>& records,
                                         uint32_t concurrency) {
  using google::protobuf::util::TimeUtil;
  crest::v1::BenchmarkResult result;
  result.set_concurrency(concurrency);
  if (records.empty()) return result;

  absl::Time first = absl::InfiniteFuture();
  absl::Time last = absl::InfinitePast();
  std::vector<double> first_token;
  std::vector<double> decode;
  std::vector<double> e2e;
  uint64_t input_tokens = 0;
  uint64_t output_tokens = 0;
  size_t with_usage = 0;
  size_t with_events = 0;
  for (const RequestRecord& r : records) {
    first = std::min(first, r.sent);
    last = std::max(last, r.sent + absl::Milliseconds(r.e2e_ms));
    if (!r.ok) {
      result.set_failed(result.failed() + 1);
      (*result.mutable_failures())[r.failure.empty() ? "unknown" : r.failure]++;
      continue;
    }
    result.set_succeeded(result.succeeded() + 1);
    if (r.output_tokens > 0) first_token.push_back(r.first_token_ms);
    for (float gap : r.decode_gaps_ms) decode.push_back(gap);
    e2e.push_back(r.e2e_ms);
    input_tokens += r.input_tokens;
    output_tokens += r.output_tokens;
    if (r.usage_reported) ++with_usage;
    if (r.token_events > 0) ++with_events;
  }
  const double seconds = std::max(absl::ToDoubleSeconds(last - first), 1e-9);
  result.mutable_started()->CopyFrom(TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(first)));
  result.mutable_duration()->CopyFrom(
      TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(last - first)));
  *result.mutable_first_token_time() = MakeStats(std::move(first_token));
  *result.mutable_decode_time() = MakeStats(std::move(decode));
  *result.mutable_e2e_latency() = MakeStats(std::move(e2e));
  result.set_input_tokens(input_tokens);
  result.set_output_tokens(output_tokens);
  result.set_generate_speed(static_cast<double>(output_tokens) / seconds);
  result.set_generate_speed_per_client(concurrency == 0 ? 0
                                                        : result.generate_speed() / concurrency);
  result.set_input_generate_speed(static_cast<double>(input_tokens) / seconds);
  result.set_total_generate_speed(static_cast<double>(input_tokens + output_tokens) / seconds);
  result.set_qps(static_cast<double>(result.succeeded()) / seconds);
  // Usage fields when every succeeded request had them (they win where both
  // exist); counted events when any request had to fall back to them.
  if (result.succeeded() > 0 && with_usage == result.succeeded()) {
    result.set_token_count_source(crest::v1::TOKEN_COUNT_SOURCE_USAGE_FIELDS);
  } else if (with_events > 0) {
    result.set_token_count_source(crest::v1::TOKEN_COUNT_SOURCE_STREAM_EVENTS);
  }
  return result;
}

}  // namespace crest::loadgen
