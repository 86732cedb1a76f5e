#include "agent/agent_metrics.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/time_util.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"

namespace crest::agent {
namespace {

using ::testing::HasSubstr;

crest::v1::BenchmarkProgress Progress(double elapsed_s, double tokens_per_second, uint64_t done) {
  crest::v1::BenchmarkProgress p;
  *p.mutable_elapsed() = google::protobuf::util::TimeUtil::MillisecondsToDuration(
      static_cast<int64_t>(elapsed_s * 1000));
  p.set_tokens_per_second(tokens_per_second);
  p.set_requests_done(done);
  p.set_requests_total(100);
  p.set_requests_in_flight(7);
  return p;
}

TEST(AgentMetrics, EverySeriesNamesItsNode) {
  AgentMetrics metrics("node-7");
  crest::v1::HostState host;
  host.set_tuned(true);
  host.set_governor("performance");
  metrics.SetHostState(host);
  metrics.BenchmarkStarted(0);
  metrics.BenchmarkProgress(0, Progress(1, 100, 3));
  int series = 0;
  for (absl::string_view line : absl::StrSplit(metrics.Serialize(), '\n')) {
    if (line.empty() || line[0] == '#') continue;
    ++series;
    EXPECT_THAT(std::string(line), HasSubstr("node=\"node-7\"")) << line;
  }
  EXPECT_GT(series, 20);
}

TEST(AgentMetrics, DaemonStartsCountAsACounter) {
  AgentMetrics metrics("n");
  crest::v1::DaemonStatus status;
  status.set_state(crest::v1::DAEMON_READY);
  status.set_restarts(2);
  status.set_npu_block_num(2176);
  metrics.SetDaemonStatus(0, status);
  metrics.SetDaemonStatus(0, status);  // the same status again adds nothing
  status.set_restarts(3);
  metrics.SetDaemonStatus(0, status);
  const std::string text = metrics.Serialize();
  EXPECT_THAT(text, HasSubstr("crest_agent_daemon_starts_total{node=\"n\",slot=\"0\"} 3"));
  EXPECT_THAT(text, HasSubstr("crest_agent_daemon_state{node=\"n\",slot=\"0\",state=\"ready\"} 1"));
  EXPECT_THAT(text,
              HasSubstr("crest_agent_daemon_state{node=\"n\",slot=\"0\",state=\"stopped\"} 0"));
  EXPECT_THAT(text, HasSubstr("crest_agent_daemon_npu_blocks{node=\"n\",slot=\"0\"} 2176"));
}

TEST(AgentMetrics, LiveTokensPerSecondOverTheLastSeconds) {
  AgentMetrics metrics("n");
  metrics.BenchmarkStarted(0);
  EXPECT_THAT(metrics.Serialize(),
              HasSubstr("crest_agent_benchmark_running{node=\"n\",slot=\"0\"} 1"));
  // 100 tokens/s for 10 s (1000 tokens), then 2000 tokens in 5 s: the run's
  // average is 200 tokens/s but the last 5 s ran at 400.
  metrics.BenchmarkProgress(0, Progress(5, 100, 10));
  metrics.BenchmarkProgress(0, Progress(10, 100, 20));
  metrics.BenchmarkProgress(0, Progress(15, 200, 50));
  const std::string text = metrics.Serialize();
  EXPECT_THAT(
      text, HasSubstr("crest_agent_benchmark_live_tokens_per_second{node=\"n\",slot=\"0\"} 400\n"));
  EXPECT_THAT(text, HasSubstr("crest_agent_benchmark_requests_done{node=\"n\",slot=\"0\"} 50"));
  EXPECT_THAT(text, HasSubstr("crest_agent_benchmark_requests_planned{node=\"n\",slot=\"0\"} 100"));
  EXPECT_THAT(text, HasSubstr("crest_agent_benchmark_requests_in_flight{node=\"n\",slot=\"0\"} 7"));
}

TEST(AgentMetrics, LastResultInBaseUnitsAndTheLiveViewStops) {
  AgentMetrics metrics("n");
  metrics.BenchmarkStarted(0);
  crest::v1::BenchmarkResult r;
  r.set_generate_speed(2980.5);
  r.set_qps(4.5);
  r.mutable_first_token_time()->set_average_ms(120);
  r.mutable_decode_time()->set_average_ms(40);
  r.set_succeeded(99);
  r.set_failed(1);
  r.mutable_daemon()->set_preemptions(12);
  metrics.RecordBenchmark(0, &r, true, absl::FromUnixSeconds(1'800'000'000));
  const std::string text = metrics.Serialize();
  EXPECT_THAT(text, HasSubstr("crest_agent_benchmark_running{node=\"n\",slot=\"0\"} 0"));
  EXPECT_THAT(text, HasSubstr("crest_agent_benchmark_requests_in_flight{node=\"n\",slot=\"0\"} 0"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "crest_agent_last_benchmark_generate_speed_tokens_per_second{node=\"n\",slot=\"0\"} "
          "2980.5"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "crest_agent_last_benchmark_first_token_average_seconds{node=\"n\",slot=\"0\"} 0.12"));
  EXPECT_THAT(
      text,
      HasSubstr("crest_agent_last_benchmark_decode_average_seconds{node=\"n\",slot=\"0\"} 0.04"));
  EXPECT_THAT(text, HasSubstr("crest_agent_last_benchmark_preemptions{node=\"n\",slot=\"0\"} 12"));
  EXPECT_THAT(text,
              HasSubstr("crest_agent_last_benchmark_end_timestamp_seconds{node=\"n\",slot=\"0\"} "
                        "1800000000"));
  EXPECT_THAT(text, HasSubstr("crest_agent_benchmarks_total{node=\"n\",result=\"ok\"} 1"));
  EXPECT_THAT(text, HasSubstr("crest_agent_benchmarks_total{node=\"n\",result=\"error\"} 0"));
}

TEST(AgentMetrics, EachSlotHasItsOwnSeries) {
  // Two slots benchmarking at once: neither overwrites the other's live
  // view, and a slot's daemon counts its own starts.
  AgentMetrics metrics("n");
  metrics.BenchmarkStarted(0);
  metrics.BenchmarkStarted(3);
  metrics.BenchmarkProgress(0, Progress(5, 100, 10));
  metrics.BenchmarkProgress(3, Progress(5, 300, 30));
  crest::v1::DaemonStatus status;
  status.set_state(crest::v1::DAEMON_READY);
  status.set_restarts(2);
  metrics.SetDaemonStatus(3, status);
  crest::v1::BenchmarkResult r;
  r.set_generate_speed(1234);
  metrics.RecordBenchmark(0, &r, true, absl::FromUnixSeconds(1'800'000'000));
  const std::string text = metrics.Serialize();
  EXPECT_THAT(text, HasSubstr("crest_agent_benchmark_running{node=\"n\",slot=\"0\"} 0"));
  EXPECT_THAT(text, HasSubstr("crest_agent_benchmark_running{node=\"n\",slot=\"3\"} 1"));
  EXPECT_THAT(text, HasSubstr("crest_agent_benchmark_requests_done{node=\"n\",slot=\"3\"} 30"));
  EXPECT_THAT(text, HasSubstr("crest_agent_last_benchmark_generate_speed_tokens_per_second{node="
                              "\"n\",slot=\"0\"} 1234"));
  EXPECT_THAT(text, HasSubstr("crest_agent_daemon_starts_total{node=\"n\",slot=\"3\"} 2"));
  EXPECT_THAT(text, HasSubstr("crest_agent_daemon_starts_total{node=\"n\",slot=\"0\"} 0"));
  EXPECT_THAT(text, HasSubstr("crest_agent_daemon_state{node=\"n\",slot=\"3\",state=\"ready\"} 1"));
  EXPECT_THAT(text,
              HasSubstr("crest_agent_daemon_state{node=\"n\",slot=\"0\",state=\"stopped\"} 1"));
}

}  // namespace
}  // namespace crest::agent
