// The simulator's Prometheus metrics (vLLM/MindIE-style names), one registry
// per daemon, serialized in text format for GET /metrics.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

namespace crest::sim {

class SimMetrics {
 public:
  SimMetrics();
  std::string Serialize() const;

  prometheus::Gauge& running;        // num_requests_running
  prometheus::Gauge& waiting;        // num_requests_waiting
  prometheus::Gauge& kv_used;        // kv_cache_blocks_used
  prometheus::Gauge& kv_total;       // kv_cache_blocks_usable
  prometheus::Gauge& cache_usage;    // npu_cache_usage_perc (0..1)
  prometheus::Counter& generated;    // generation_tokens_total
  prometheus::Counter& prompt;       // prompt_tokens_total
  prometheus::Counter& preemptions;  // num_preemptions_total
  prometheus::Counter& requests;     // request_received_total
  prometheus::Counter& finished;     // request_success_total

 private:
  explicit SimMetrics(std::shared_ptr<prometheus::Registry> registry);
  std::shared_ptr<prometheus::Registry> registry_;
};

}  // namespace crest::sim
