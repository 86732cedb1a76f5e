// The agent's own Prometheus metrics, every series labelled with its node:
// host tuning state, and per daemon slot the daemon's state and starts, the
// benchmark running now (requests done, in flight, tokens/s over the last
// seconds) and the last benchmark's figures.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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

  // The daemon and benchmark series carry the slot they describe (`slot`,
  // "0" on an agent without slots); slot 0's exist from the start, another
  // slot's from its first report.
  void SetDaemonStatus(uint32_t slot, const crest::v1::DaemonStatus& status);
  void SetHostState(const crest::v1::HostState& state);
  // A slot's live benchmark: started, each progress report, ended (RecordBenchmark).
  void BenchmarkStarted(uint32_t slot);
  void BenchmarkProgress(uint32_t slot, const crest::v1::BenchmarkProgress& progress);
  void RecordBenchmark(uint32_t slot, const crest::v1::BenchmarkResult* result, bool ok,
                       absl::Time ended);
  // Prometheus text of everything (tests, debugging).
  std::string Serialize() const;

  // Live tokens/s is averaged over this much of the run.
  static constexpr absl::Duration kLiveWindow = absl::Seconds(5);

 private:
  // One slot's series and what the live rate is computed from.
  struct SlotSeries {
    std::map<std::string, std::string> label;
    prometheus::Counter* daemon_starts = nullptr;
    prometheus::Gauge* npu_block_num = nullptr;
    prometheus::Gauge* running = nullptr;
    prometheus::Gauge* live_done = nullptr;
    prometheus::Gauge* live_failed = nullptr;
    prometheus::Gauge* live_planned = nullptr;
    prometheus::Gauge* live_in_flight = nullptr;
    prometheus::Gauge* live_tokens_per_second = nullptr;
    prometheus::Gauge* generate_speed = nullptr;
    prometheus::Gauge* generate_speed_per_client = nullptr;
    prometheus::Gauge* requests_per_second = nullptr;
    prometheus::Gauge* first_token = nullptr;
    prometheus::Gauge* decode = nullptr;
    prometheus::Gauge* last_succeeded = nullptr;
    prometheus::Gauge* last_failed = nullptr;
    prometheus::Gauge* last_end = nullptr;
    uint64_t daemon_starts_seen = 0;
    // (elapsed, output tokens so far) of the live run's recent progress reports.
    std::deque<std::pair<absl::Duration, double>> samples;
  };
  // A per-slot gauge: its name, help and handle in SlotSeries.
  struct SlotGauge {
    const char* name;
    const char* help;
    prometheus::Gauge* SlotSeries::*handle;
  };
  static const SlotGauge kSlotGauges[];
  SlotSeries& Slot(uint32_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the slot's daemon-state series: 1 for `current`, 0 for the others.
  void SetDaemonState(const SlotSeries& s, crest::v1::DaemonState current);

  std::shared_ptr<prometheus::Registry> registry_;
  std::map<std::string, std::string> node_label_;
  prometheus::Family<prometheus::Gauge>* daemon_state_;
  prometheus::Family<prometheus::Counter>* daemon_starts_;
  // The families of kSlotGauges, in its order.
  std::vector<prometheus::Family<prometheus::Gauge>*> slot_gauges_;
  prometheus::Family<prometheus::Gauge>* preemptions_;
  prometheus::Family<prometheus::Counter>* benchmarks_;
  prometheus::Gauge* host_tuned_;
  prometheus::Family<prometheus::Gauge>* host_setting_;
  absl::Mutex mu_;
  std::string last_governor_ ABSL_GUARDED_BY(mu_);
  std::string last_thp_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, SlotSeries> slots_ ABSL_GUARDED_BY(mu_);
};

}  // namespace crest::agent
