// The agent's own Prometheus metrics, every series labelled with its node:
// daemon state and starts, host tuning state, the benchmark running now
// (requests done, in flight, tokens/s over the last seconds) and the last
// benchmark's figures. Handles are cached at construction.
#pragma once

#include <deque>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

#include "crest/v1/agent.pb.h"
#include "crest/v1/benchmark.pb.h"

namespace crest::agent {

class AgentMetrics {
 public:
  explicit AgentMetrics(const std::string& node);
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  void SetDaemonStatus(const crest::v1::DaemonStatus& status);
  void SetHostState(const crest::v1::HostState& state);
  // The live benchmark: started, each progress report, ended (RecordBenchmark).
  void BenchmarkStarted();
  void BenchmarkProgress(const crest::v1::BenchmarkProgress& progress);
  void RecordBenchmark(const crest::v1::BenchmarkResult* result, bool ok, absl::Time ended);
  // Prometheus text of everything (tests, debugging).
  std::string Serialize() const;

  // Live tokens/s is averaged over this much of the run.
  static constexpr absl::Duration kLiveWindow = absl::Seconds(5);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>* daemon_state_;
  prometheus::Counter* daemon_starts_;
  prometheus::Gauge* npu_block_num_;
  prometheus::Gauge* running_;
  prometheus::Gauge* live_done_;
  prometheus::Gauge* live_failed_;
  prometheus::Gauge* live_planned_;
  prometheus::Gauge* live_in_flight_;
  prometheus::Gauge* live_tokens_per_second_;
  prometheus::Gauge* generate_speed_;
  prometheus::Gauge* generate_speed_per_client_;
  prometheus::Gauge* requests_per_second_;
  prometheus::Gauge* first_token_;
  prometheus::Gauge* decode_;
  prometheus::Gauge* last_succeeded_;
  prometheus::Gauge* last_failed_;
  prometheus::Gauge* last_end_;
  prometheus::Family<prometheus::Gauge>* preemptions_;
  prometheus::Family<prometheus::Counter>* benchmarks_;
  prometheus::Gauge* host_tuned_;
  prometheus::Family<prometheus::Gauge>* host_setting_;
  absl::Mutex mu_;
  std::string last_governor_ ABSL_GUARDED_BY(mu_);
  std::string last_thp_ ABSL_GUARDED_BY(mu_);
  uint64_t daemon_starts_seen_ ABSL_GUARDED_BY(mu_) = 0;
  // (elapsed, output tokens so far) of the live run's recent progress reports.
  std::deque<std::pair<absl::Duration, double>> samples_ ABSL_GUARDED_BY(mu_);
};

}  // namespace crest::agent
