// The simulator's Prometheus metrics (MindIE's names, which follow vLLM's),
// one registry per daemon, serialized in text format for GET /metrics. Every
// series carries a `model_name` label, as MindIE's do.
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

  prometheus::Gauge& running;        // num_requests_running
  prometheus::Gauge& waiting;        // num_requests_waiting
  prometheus::Gauge& swapped;        // num_requests_swapped (always 0: recompute, no swap)
  prometheus::Gauge& kv_used;        // kv_cache_blocks_used
  prometheus::Gauge& kv_total;       // kv_cache_blocks_usable
  prometheus::Gauge& cache_usage;    // npu_cache_usage_perc (0..1)
  prometheus::Counter& generated;    // generation_tokens_total
  prometheus::Counter& prompt;       // prompt_tokens_total
  prometheus::Counter& preemptions;  // num_preemptions_total
  prometheus::Counter& requests;     // request_received_total
  prometheus::Counter& finished;     // request_success_total
  prometheus::Counter& failed;       // request_failed_total
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
