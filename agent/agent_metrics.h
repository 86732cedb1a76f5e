// The agent's own Prometheus metrics: daemon state and restarts, the last
// benchmark's figures, host tuning state. Handles are cached at construction.
#pragma once

#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

#include "crest/v1/agent.pb.h"
#include "crest/v1/benchmark.pb.h"

namespace crest::agent {

class AgentMetrics {
 public:
  AgentMetrics();
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  void SetDaemonStatus(const crest::v1::DaemonStatus& status);
  void SetHostState(const crest::v1::HostState& state);
  void RecordBenchmark(const crest::v1::BenchmarkResult* result, bool ok);
  // Prometheus text of everything (tests, debugging).
  std::string Serialize() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>* daemon_state_;
  prometheus::Gauge* daemon_restarts_;
  prometheus::Gauge* npu_block_num_;
  prometheus::Gauge* generate_speed_;
  prometheus::Gauge* generate_speed_per_client_;
  prometheus::Gauge* qps_;
  prometheus::Gauge* first_token_ms_;
  prometheus::Gauge* decode_ms_;
  prometheus::Family<prometheus::Counter>* benchmarks_;
  prometheus::Gauge* host_tuned_;
  prometheus::Family<prometheus::Gauge>* host_setting_;
  absl::Mutex mu_;
  std::string last_governor_ ABSL_GUARDED_BY(mu_);
  std::string last_thp_ ABSL_GUARDED_BY(mu_);
};

}  // namespace crest::agent
