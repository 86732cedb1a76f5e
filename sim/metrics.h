// The simulator's Prometheus metrics, one registry per daemon, serialized in
// text format for GET /metrics: MindIE's names and help texts (MindIE-LLM's
// prometheus_metrics.cpp; tests/data/real/metrics), each series with a
// `model_name` label as MindIE's have. MindIE's histograms and average
// throughput gauges are not simulated; kv_cache_blocks_used/usable and
// mindie_sim_simulated_seconds_total are the simulator's own.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <memory>
#include <set>
#include <string>

namespace crest::sim {

class SimMetrics {
 public:
  // `omit`: metric names left out of Serialize(), to stand in for a MindIE
  // build that does not publish them (mindie-sim --omit-metrics).
  explicit SimMetrics(const std::string& model_name, std::set<std::string> omit = {});
  std::string Serialize() const;

  prometheus::Gauge& running;          // num_requests_running
  prometheus::Gauge& waiting;          // num_requests_waiting
  prometheus::Gauge& swapped;          // num_requests_swapped (always 0: recompute, no swap)
  prometheus::Gauge& kv_used;          // kv_cache_blocks_used
  prometheus::Gauge& kv_total;         // kv_cache_blocks_usable
  prometheus::Gauge& cache_usage;      // npu_cache_usage_perc (0..1)
  prometheus::Gauge& cpu_cache_usage;  // cpu_cache_usage_perc (always 0: no swap to CPU)
  prometheus::Gauge& prefix_hit_rate;  // npu_prefix_cache_hit_rate (always 0: no prefix cache)
  prometheus::Gauge& failed_perc;      // failed_request_perc, failed / received, set when read
  prometheus::Counter& generated;      // generation_tokens_total
  prometheus::Counter& prompt;         // prompt_tokens_total
  prometheus::Counter& preemptions;    // num_preemptions_total
  prometheus::Counter& requests;       // request_received_total
  prometheus::Counter& finished;       // request_success_total
  prometheus::Counter& failed;         // request_failed_total
  // mindie-sim only (MindIE has no such series): the simulated NPU time the
  // engine has run, the time base of the model's figures at any --time-scale,
  // which a CPU-starved process or client cannot distort.
  prometheus::Counter& simulated_seconds;  // mindie_sim_simulated_seconds_total

 private:
  SimMetrics(std::shared_ptr<prometheus::Registry> registry, const std::string& model_name,
             std::set<std::string> omit);
  std::shared_ptr<prometheus::Registry> registry_;
  std::set<std::string> omit_;
};

}  // namespace crest::sim
