#include "agent/daemon_metrics.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <optional>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "common/file_util.h"
#include "common/testing/status_matchers.h"

namespace crest::agent {
namespace {

using ::crest::testing::StatusIs;
using ::testing::HasSubstr;

// What MindIE's metrics port answers (mindie-facts.md: vLLM's names, a
// model_name label on every series), with the corners of the format.
constexpr char kMindieText[] =
    R"(# HELP num_preemptions_total Cumulative number of preemption from the engine.
# TYPE num_preemptions_total counter
num_preemptions_total{model_name="llama2-7b"} 637
# HELP request_success_total Count of successfully processed requests.
# TYPE request_success_total counter
request_success_total{model_name="llama2-7b",finished_reason="stop"} 1200
request_success_total{model_name="llama2-7b",finished_reason="length"} 119 1700000000000
# TYPE num_requests_running gauge
num_requests_running{model_name="llama2-7b"} 12.0
num_requests_waiting{model_name="llama2-7b"}	3
avg_generation_throughput_toks_per_s{model_name="llama2-7b"} NaN
request_prompt_tokens_bucket{model_name="llama2-7b",le="+Inf"} 5
weird{model_name="a \"quoted\" \\ name\nx",} -Inf
)";

TEST(ParsePrometheusTextTest, ReadsMindieShapedText) {
  auto samples = ParsePrometheusText(kMindieText);
  CREST_ASSERT_OK(samples);
  ASSERT_EQ(samples->size(), 8u);
  const PromSample& p = (*samples)[0];
  EXPECT_EQ(p.name, "num_preemptions_total");
  EXPECT_EQ(p.labels.at("model_name"), "llama2-7b");
  EXPECT_EQ(p.value, 637);
  EXPECT_FALSE(p.timestamp_ms.has_value());
  EXPECT_EQ((*samples)[2].labels.at("finished_reason"), "length");
  EXPECT_EQ((*samples)[2].timestamp_ms, 1700000000000);
  EXPECT_EQ((*samples)[4].value, 3);  // tab before the value
  EXPECT_TRUE(std::isnan((*samples)[5].value));
  EXPECT_EQ((*samples)[6].labels.at("le"), "+Inf");
  const PromSample& w = (*samples)[7];
  EXPECT_EQ(w.labels.at("model_name"), "a \"quoted\" \\ name\nx");
  EXPECT_EQ(w.value, -HUGE_VAL);

  MetricTotals t = TotalsOf(*samples);
  EXPECT_EQ(t.at("request_success_total"), 1319);  // summed over label sets
  EXPECT_EQ(t.at("num_requests_running"), 12);
  EXPECT_EQ(t.count("avg_generation_throughput_toks_per_s"), 0u);  // NaN left out
}

TEST(ParsePrometheusTextTest, EmptyAndCommentOnlyTextHasNoSamples) {
  auto samples = ParsePrometheusText("\n# HELP x y\r\n   \n");
  CREST_ASSERT_OK(samples);
  EXPECT_TRUE(samples->empty());
}

TEST(ParsePrometheusTextTest, MalformedLinesNameTheLineAndWhatWasExpected) {
  auto error = [](const std::string& text, const std::string& what) {
    EXPECT_THAT(ParsePrometheusText(text),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(what)))
        << text;
  };
  error("a 1\nb{x=\"1\"}\n", "metrics line 2: expected a value after the metric name");
  error("9abc 1", "metrics line 1: expected a metric name");
  error(R"(a{x="1" 2)", "expected ',' or '}' after label x");
  error("a{x=1} 2", "expected '\"' to open the value of label x");
  error("a{x} 2", "expected '=' after label x");
  error(R"(a{x="1} 2)", "unterminated value of label x");
  error(R"(a{x="\t"} 2)", R"(unknown escape \t in label x)");
  error(R"(a{x="1",x="2"} 2)", "label x given twice");
  error("a{,} 2", "expected a label name or '}'");
  error("a twelve", R"(expected a number, NaN or +Inf/-Inf as the value, got "twelve")");
  error("a nan", R"(got "nan")");
  error("a 0x10", R"(got "0x10")");
  error("a 1 12.5", R"(expected an integer timestamp in ms, got "12.5")");
  error("a 1 12 extra", R"(unexpected "extra" after the timestamp)");
}

MetricTotals Totals(const std::string& text) {
  auto s = ParsePrometheusText(text);
  EXPECT_TRUE(s.ok()) << s.status();
  return TotalsOf(s.ok() ? *s : std::vector<PromSample>{});
}

TEST(SummarizeTest, CountersAreDeltasAndGaugesArePeaks) {
  std::vector<std::string> errors;
  auto m = Summarize(
      Totals("num_preemptions_total 10\nrequest_success_total 4\nrequest_failed_total 1\n"
             "num_requests_running 0\nnum_requests_waiting 0\nnpu_cache_usage_perc 0\n"),
      {Totals("num_requests_running 7\nnum_requests_waiting 9\nnpu_cache_usage_perc 0.5"),
       Totals("num_requests_running 8\nnum_requests_waiting 2\nnpu_cache_usage_perc 0.97")},
      Totals("num_preemptions_total 25\nrequest_success_total 104\nrequest_failed_total 1\n"
             "num_requests_running 0\nnum_requests_waiting 0\nnpu_cache_usage_perc 0.1\n"),
      &errors);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(m.preemptions(), 15u);
  EXPECT_EQ(m.succeeded(), 100u);
  ASSERT_TRUE(m.has_failed());
  EXPECT_EQ(m.failed(), 0u);  // published and unchanged: 0, not absent
  EXPECT_EQ(m.peak_running(), 8u);
  EXPECT_EQ(m.peak_waiting(), 9u);
  EXPECT_DOUBLE_EQ(m.peak_kv_cache_usage(), 0.97);
  EXPECT_EQ(m.samples(), 2u);
}

TEST(SummarizeTest, WhatTheDaemonDoesNotPublishStaysAbsent) {
  std::vector<std::string> errors;
  auto m = Summarize(Totals("request_success_total 4\nnum_requests_running 0"), {},
                     Totals("request_success_total 6\nnum_requests_running 1"), &errors);
  EXPECT_FALSE(m.has_preemptions());
  EXPECT_FALSE(m.has_failed());
  EXPECT_FALSE(m.has_peak_waiting());
  EXPECT_FALSE(m.has_peak_kv_cache_usage());
  EXPECT_EQ(m.succeeded(), 2u);
  EXPECT_EQ(m.peak_running(), 1u);
}

TEST(SummarizeTest, KvUseFallsBackToBlockCounts) {
  std::vector<std::string> errors;
  auto m = Summarize(Totals("kv_cache_blocks_used 10\nkv_cache_blocks_usable 40"), {},
                     Totals("kv_cache_blocks_used 30\nkv_cache_blocks_usable 40"), &errors);
  EXPECT_DOUBLE_EQ(m.peak_kv_cache_usage(), 0.75);
}

TEST(SummarizeTest, ACounterThatWentDownIsAbsentWithTheReason) {
  std::vector<std::string> errors;
  auto m =
      Summarize(Totals("num_preemptions_total 50"), {}, Totals("num_preemptions_total 3"), &errors);
  EXPECT_FALSE(m.has_preemptions());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], HasSubstr("num_preemptions_total went down from 50 to 3"));
}

TEST(SummarizeTest, WithoutTheScrapeBeforeCountersAreAbsentButPeaksRemain) {
  std::vector<std::string> errors;
  auto m = Summarize(std::nullopt, {Totals("num_requests_running 5")},
                     Totals("num_preemptions_total 9\nnum_requests_running 0"), &errors);
  EXPECT_FALSE(m.has_preemptions());
  EXPECT_EQ(m.peak_running(), 5u);
}

// Scripted answers of /metrics, one per scrape, in order.
class ScriptedFetch {
 public:
  explicit ScriptedFetch(std::deque<absl::StatusOr<std::string>> answers)
      : answers_(std::move(answers)) {}
  DaemonMetricsRecorder::Fetch fetch() {
    return [this]() -> absl::StatusOr<std::string> {
      if (answers_.empty()) return absl::InternalError("no more scripted answers");
      auto a = answers_.front();
      answers_.pop_front();
      return a;
    };
  }
  size_t left() const { return answers_.size(); }

 private:
  std::deque<absl::StatusOr<std::string>> answers_;
};

// --------------------------------------------- real expositions (corpus)

std::string RealMetrics(const std::string& name) {
  const char* src = std::getenv("CREST_SOURCE_DIR");
  auto text = ReadFileToString(std::string(src != nullptr ? src : ".") +
                               "/tests/data/real/metrics/" + name);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

// Every exposition of tests/data/real/metrics through the parser and the
// summary a benchmark run records: the read names as the file has them
// (the multi-model label "modelA & modelB" included), and a second scrape of
// the same daemon 10 preemptions and 5 successes later gives those deltas.
TEST(DaemonMetricsCorpusTest, EveryRealExpositionIsReadAsARunWouldReadIt) {
  struct Case {
    std::string file;
    double preemptions;
    double succeeded;
    std::optional<double> cache_usage;  // absent where the file lacks it
  };
  const std::vector<Case> cases = {
      {"MindIE-Motor-doc-coordinator-metrics-response-sample.txt", 637, 2267, 1},
      {"MindIE-Motor-test-fixture-ms_metricsPDSeparateNodeData.txt", 10192, 0, 0.1},
      {"MindIE-Motor-test-fixture-ms_metricsSingleNodeData_0.txt", 1274, 0, 0.1},
      {"assembled-from-prometheus_metrics.cpp-ours.txt", 0, 0, 0},
      {"gpustack-issue-1785-real-daemon-metrics-partial.txt", 0, 4, std::nullopt},
  };
  std::set<std::string> files;
  const char* src = std::getenv("CREST_SOURCE_DIR");
  for (const auto& entry : std::filesystem::directory_iterator(
           std::string(src != nullptr ? src : ".") + "/tests/data/real/metrics")) {
    if (entry.path().extension() == ".txt") files.insert(entry.path().filename().string());
  }
  std::set<std::string> rows;
  for (const Case& c : cases) {
    rows.insert(c.file);
    SCOPED_TRACE(c.file);
    const std::string text = RealMetrics(c.file);
    absl::StatusOr<std::vector<PromSample>> samples = ParsePrometheusText(text);
    ASSERT_TRUE(samples.ok()) << samples.status();
    MetricTotals before = TotalsOf(*samples);
    EXPECT_EQ(before.at(kPreemptionsMetric), c.preemptions);
    EXPECT_EQ(before.at(kSucceededMetric), c.succeeded);
    EXPECT_EQ(before.count(kBlocksUsedMetric), 0u);  // mindie-sim's own series
    if (c.cache_usage) {
      EXPECT_DOUBLE_EQ(before.at(kCacheUsageMetric), *c.cache_usage);
    } else {
      EXPECT_EQ(before.count(kCacheUsageMetric), 0u);
    }
    MetricTotals after = before;
    after[kPreemptionsMetric] += 10;
    after[kSucceededMetric] += 5;
    std::vector<std::string> errors;
    crest::v1::DaemonRunMetrics run = Summarize(before, {}, after, &errors);
    EXPECT_TRUE(errors.empty()) << errors.front();
    EXPECT_EQ(run.preemptions(), 10u);
    EXPECT_EQ(run.succeeded(), 5u);
    EXPECT_EQ(run.has_peak_kv_cache_usage(), c.cache_usage.has_value());
  }
  EXPECT_EQ(files, rows);
  // The multi-model label, joined as MindIE joins it.
  absl::StatusOr<std::vector<PromSample>> joined =
      ParsePrometheusText(RealMetrics("assembled-from-prometheus_metrics.cpp-ours.txt"));
  ASSERT_TRUE(joined.ok());
  EXPECT_EQ(joined->front().labels.at("model_name"), "modelA & modelB");
}

TEST(DaemonMetricsRecorderTest, ScrapesBeforeSamplesAndAfter) {
  ScriptedFetch script({"num_preemptions_total{model_name=\"m\"} 3\nnum_requests_running 0",
                        R"(num_requests_running{model_name="m"} 31)",
                        "num_preemptions_total{model_name=\"m\"} 10\nnum_requests_running 0"});
  DaemonMetricsRecorder r(script.fetch(), absl::ZeroDuration());  // samples by hand
  r.Begin();
  r.Sample();
  auto m = r.End();
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(script.left(), 0u);
  EXPECT_EQ(m->preemptions(), 7u);
  EXPECT_EQ(m->peak_running(), 31u);
  EXPECT_EQ(m->samples(), 1u);
  EXPECT_EQ(m->error(), "");
}

TEST(DaemonMetricsRecorderTest, AFailedScrapeFillsErrorAndLeavesItsFiguresAbsent) {
  ScriptedFetch script({absl::UnavailableError("GET http://x/metrics: Connection refused"),
                        "garbage here", "num_preemptions_total 4\nnum_requests_running 2"});
  DaemonMetricsRecorder r(script.fetch(), absl::ZeroDuration());
  r.Begin();
  r.Sample();
  auto m = r.End();
  ASSERT_TRUE(m.has_value());
  EXPECT_FALSE(m->has_preemptions());
  EXPECT_EQ(m->peak_running(), 2u);
  EXPECT_EQ(m->samples(), 0u);
  EXPECT_THAT(m->error(), HasSubstr("scrape before the run: GET http://x/metrics: Connection "
                                    "refused"));
  EXPECT_THAT(m->error(), HasSubstr("sample during the run: metrics line 1"));
}

TEST(DaemonMetricsRecorderTest, NothingWhenTheRunNeverReachedItsMeasuredPart) {
  ScriptedFetch script({});
  DaemonMetricsRecorder r(script.fetch(), absl::Milliseconds(1));
  EXPECT_FALSE(r.End().has_value());
}

TEST(DaemonMetricsRecorderTest, TheSamplerThreadStopsAtEnd) {
  // The sampler may take any number of samples; End() must stop it and the
  // before/after delta must not depend on how many it took.
  std::atomic<int> calls{0};
  DaemonMetricsRecorder r(
      [&calls]() -> absl::StatusOr<std::string> {
        int n = calls++;
        return absl::StrCat("request_success_total ", n == 0 ? 0 : 100, "\nnum_requests_running ",
                            n == 0 ? 0 : 4);
      },
      absl::Microseconds(1));
  r.Begin();
  auto m = r.End();
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->succeeded(), 100u);
  EXPECT_EQ(m->peak_running(), 4u);
  int after_end = calls.load();
  EXPECT_EQ(static_cast<int>(m->samples()) + 2, after_end);
}

}  // namespace
}  // namespace crest::agent
