// The serving daemon's own Prometheus metrics around one benchmark run: a
// strict parser of the text exposition format, and a recorder that scrapes
// /metrics just before the measured requests, samples it during the run and
// scrapes it again after, to fill crest.v1.DaemonRunMetrics (counter deltas,
// gauge peaks). A metric the daemon does not publish stays absent, never 0.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "crest/v1/benchmark.pb.h"

namespace crest::agent {

// One sample line: `name{label="value",...} value [timestamp_ms]`.
struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;  // may be NaN or +-Inf
  std::optional<int64_t> timestamp_ms;
};

// Parses Prometheus text format 0.0.4. Comment lines (# HELP, # TYPE, ...)
// and blank lines are skipped. INVALID_ARGUMENT names the 1-based line and
// what was expected there.
absl::StatusOr<std::vector<PromSample>> ParsePrometheusText(absl::string_view text);

// One scrape reduced to what the recorder needs: per metric name, the sum of
// its series' values (MindIE serves one model, so one series per name; the
// `model_name` label is not needed to tell them apart). NaN samples are left
// out.
using MetricTotals = std::map<std::string, double>;
MetricTotals TotalsOf(const std::vector<PromSample>& samples);

// The names read, as MindIE publishes them (mindie-facts.md).
inline constexpr char kPreemptionsMetric[] = "num_preemptions_total";
inline constexpr char kSucceededMetric[] = "request_success_total";
inline constexpr char kFailedMetric[] = "request_failed_total";
inline constexpr char kRunningMetric[] = "num_requests_running";
inline constexpr char kWaitingMetric[] = "num_requests_waiting";
inline constexpr char kCacheUsageMetric[] = "npu_cache_usage_perc";
inline constexpr char kBlocksUsedMetric[] = "kv_cache_blocks_used";
inline constexpr char kBlocksTotalMetric[] = "kv_cache_blocks_usable";

// The run's figures from the scrape before, the samples during and the
// scrape after (either may be missing when it failed): counters as
// after - before (absent unless both have them, and when one went
// backwards), gauges as the peak over every scrape that has them. Errors are
// left to the caller.
crest::v1::DaemonRunMetrics Summarize(const std::optional<MetricTotals>& before,
                                      const std::vector<MetricTotals>& during,
                                      const std::optional<MetricTotals>& after,
                                      std::vector<std::string>* errors);

// Scrapes around one run. Begin() and End() on one thread; the sampler runs
// on its own.
class DaemonMetricsRecorder {
 public:
  // Returns the text of GET /metrics.
  using Fetch = std::function<absl::StatusOr<std::string>()>;

  // `period` between samples during the run; zero: no sampling, only the
  // scrapes before and after.
  DaemonMetricsRecorder(Fetch fetch, absl::Duration period);
  ~DaemonMetricsRecorder();  // stops the sampler
  DaemonMetricsRecorder(const DaemonMetricsRecorder&) = delete;
  DaemonMetricsRecorder& operator=(const DaemonMetricsRecorder&) = delete;

  // The scrape before the run, then sampling starts. Once only.
  void Begin();
  // One sample now (what the sampler does every period).
  void Sample();
  // Stops sampling, scrapes after the run, and returns the figures; nullopt
  // when Begin() never ran (the run ended before its measured part).
  std::optional<crest::v1::DaemonRunMetrics> End();

 private:
  // A scrape parsed; the error is recorded with `when` and nullopt returned.
  std::optional<MetricTotals> Scrape(const char* when);
  void SamplerLoop();

  const Fetch fetch_;
  const absl::Duration period_;
  absl::Mutex mu_;
  bool begun_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<MetricTotals> before_ ABSL_GUARDED_BY(mu_);
  std::vector<MetricTotals> during_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
  int failed_samples_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread sampler_;
};

// GET <https|http>://<management ip>:<metricsPort>/metrics of the daemon.
DaemonMetricsRecorder::Fetch MetricsFetcher(std::string url, std::string ca_file);

}  // namespace crest::agent
