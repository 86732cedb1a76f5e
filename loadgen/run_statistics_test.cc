#include "loadgen/run_statistics.h"

#include <gtest/gtest.h>

#include "google/protobuf/util/time_util.h"

namespace crest::loadgen {
namespace {

TEST(PercentileTest, InterpolatesLinearlyLikeNumpy) {
  std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 3.7);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
}

TEST(MakeStatsTest, AllFields) {
  crest::v1::LatencyStats s = MakeStats({5, 1, 3});
  EXPECT_DOUBLE_EQ(s.average_ms(), 3);
  EXPECT_DOUBLE_EQ(s.p50_ms(), 3);
  EXPECT_DOUBLE_EQ(s.max_ms(), 5);
  EXPECT_DOUBLE_EQ(s.min_ms(), 1);
  EXPECT_EQ(s.samples(), 3U);
}

RequestRecord Ok(absl::Time sent, double e2e, uint32_t out, std::vector<float> gaps) {
  RequestRecord r;
  r.sent = sent;
  r.e2e_ms = e2e;
  r.first_token_ms = 10;
  r.output_tokens = out;
  r.input_tokens = 4;
  r.ok = true;
  r.usage_reported = true;
  r.token_events = out;
  r.decode_gaps_ms = std::move(gaps);
  return r;
}

TEST(ComputeResultTest, SpeedsOverFirstSendToLastFinishAndFailuresCounted) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  std::vector<RequestRecord> records;
  records.push_back(Ok(t0, 1000, 10, {1, 3}));
  records.push_back(Ok(t0 + absl::Milliseconds(500), 1500, 30, {2}));  // ends at 2.0 s
  RequestRecord failed;
  failed.sent = t0 + absl::Milliseconds(100);
  failed.e2e_ms = 50;
  failed.failure = "http_503";
  failed.output_tokens = 99;  // never counted: the request failed
  records.push_back(failed);
  crest::v1::BenchmarkResult r = ComputeResult(records, 4);
  EXPECT_EQ(r.succeeded(), 2U);
  EXPECT_EQ(r.failed(), 1U);
  EXPECT_EQ(r.failures().at("http_503"), 1U);
  EXPECT_EQ(r.output_tokens(), 40U);
  EXPECT_EQ(r.input_tokens(), 8U);
  EXPECT_DOUBLE_EQ(r.generate_speed(), 20.0);  // 40 tokens over 2 s
  EXPECT_DOUBLE_EQ(r.generate_speed_per_client(), 5.0);
  EXPECT_DOUBLE_EQ(r.qps(), 1.0);
  EXPECT_DOUBLE_EQ(r.decode_time().average_ms(), 2.0);  // pooled gaps {1,3,2}
  EXPECT_EQ(r.decode_time().samples(), 3U);
  EXPECT_EQ(google::protobuf::util::TimeUtil::DurationToMilliseconds(r.duration()), 2000);
  EXPECT_EQ(r.token_count_source(), crest::v1::TOKEN_COUNT_SOURCE_USAGE_FIELDS);
  EXPECT_EQ(r.concurrency(), 4U);
}

TEST(ComputeResultTest, StreamEventsSourceWhenAnyRequestLackedUsage) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  std::vector<RequestRecord> records = {Ok(t0, 10, 2, {}), Ok(t0, 10, 2, {})};
  records[1].usage_reported = false;
  EXPECT_EQ(ComputeResult(records, 1).token_count_source(),
            crest::v1::TOKEN_COUNT_SOURCE_STREAM_EVENTS);
  EXPECT_EQ(ComputeResult({}, 3).succeeded(), 0U);
}

}  // namespace
}  // namespace crest::loadgen
