#include "sim/metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>

namespace crest::sim {
namespace {

prometheus::Gauge& MakeGauge(prometheus::Registry& r, const std::string& name,
                             const std::string& help, const std::string& model) {
  return prometheus::BuildGauge()
      .Name(name)
      .Help(help)
      .Labels({{"model_name", model}})
      .Register(r)
      .Add({});
}
prometheus::Counter& MakeCounter(prometheus::Registry& r, const std::string& name,
                                 const std::string& help, const std::string& model) {
  return prometheus::BuildCounter()
      .Name(name)
      .Help(help)
      .Labels({{"model_name", model}})
      .Register(r)
      .Add({});
}

}  // namespace

SimMetrics::SimMetrics(const std::string& model_name, std::set<std::string> omit)
    : SimMetrics(std::make_shared<prometheus::Registry>(), model_name, std::move(omit)) {}

SimMetrics::SimMetrics(std::shared_ptr<prometheus::Registry> registry,
                       const std::string& model_name, std::set<std::string> omit)
    : running(MakeGauge(*registry, "num_requests_running",
                        "Number of requests currently running on NPU.", model_name)),
      waiting(MakeGauge(*registry, "num_requests_waiting",
                        "Number of requests waiting to be processed.", model_name)),
      swapped(MakeGauge(*registry, "num_requests_swapped", "Number of requests swapped to CPU.",
                        model_name)),
      kv_used(MakeGauge(*registry, "kv_cache_blocks_used",
                        "KV-cache blocks in use (mindie-sim only)", model_name)),
      kv_total(MakeGauge(*registry, "kv_cache_blocks_usable",
                         "Usable KV-cache blocks (mindie-sim only)", model_name)),
      cache_usage(MakeGauge(*registry, "npu_cache_usage_perc",
                            "NPU KV-cache usage. 1 means 100 percent usage.", model_name)),
      cpu_cache_usage(MakeGauge(*registry, "cpu_cache_usage_perc",
                                "CPU KV-cache usage. 1 means 100 percent usage.", model_name)),
      prefix_hit_rate(MakeGauge(*registry, "npu_prefix_cache_hit_rate",
                                "NPU prefix cache block hit rate.", model_name)),
      failed_perc(MakeGauge(*registry, "failed_request_perc",
                            "Requests failure rate. 1 means 100 percent usage.", model_name)),
      generated(MakeCounter(*registry, "generation_tokens_total",
                            "Number of generation tokens processed.", model_name)),
      prompt(MakeCounter(*registry, "prompt_tokens_total", "Number of prefill tokens processed.",
                         model_name)),
      preemptions(MakeCounter(*registry, "num_preemptions_total",
                              "Cumulative number of preemption from the engine.", model_name)),
      requests(MakeCounter(*registry, "request_received_total", "Count of received requests.",
                           model_name)),
      finished(MakeCounter(*registry, "request_success_total",
                           "Count of successfully processed requests.", model_name)),
      failed(
          MakeCounter(*registry, "request_failed_total", "Count of failed requests.", model_name)),
      simulated_seconds(MakeCounter(*registry, "mindie_sim_simulated_seconds_total",
                                    "Simulated NPU time run by the engine (mindie-sim only)",
                                    model_name)),
      registry_(std::move(registry)),
      omit_(std::move(omit)) {}

std::string SimMetrics::Serialize() const {
  // MindIE refreshes its rate from the counters; so does the simulator, when read.
  const double received = requests.Value();
  failed_perc.Set(received > 0 ? failed.Value() / received : 0);
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::erase_if(families,
                [this](const prometheus::MetricFamily& f) { return omit_.count(f.name) > 0; });
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace crest::sim
