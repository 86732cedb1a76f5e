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
    : running(MakeGauge(*registry, "num_requests_running", "Sequences in the running batch",
                        model_name)),
      waiting(MakeGauge(*registry, "num_requests_waiting", "Sequences waiting for prefill",
                        model_name)),
      swapped(MakeGauge(*registry, "num_requests_swapped", "Sequences swapped out to host memory",
                        model_name)),
      kv_used(MakeGauge(*registry, "kv_cache_blocks_used", "KV-cache blocks in use", model_name)),
      kv_total(
          MakeGauge(*registry, "kv_cache_blocks_usable", "Usable KV-cache blocks", model_name)),
      cache_usage(
          MakeGauge(*registry, "npu_cache_usage_perc", "Fraction of KV blocks in use", model_name)),
      generated(MakeCounter(*registry, "generation_tokens_total", "Generated tokens", model_name)),
      prompt(MakeCounter(*registry, "prompt_tokens_total", "Prompt tokens of accepted requests",
                         model_name)),
      preemptions(
          MakeCounter(*registry, "num_preemptions_total", "Sequences preempted", model_name)),
      requests(MakeCounter(*registry, "request_received_total", "Generation requests received",
                           model_name)),
      finished(MakeCounter(*registry, "request_success_total", "Requests finished", model_name)),
      failed(MakeCounter(*registry, "request_failed_total",
                         "Generation requests refused or abandoned", model_name)),
      simulated_seconds(MakeCounter(*registry, "mindie_sim_simulated_seconds_total",
                                    "Simulated NPU time run by the engine (mindie-sim only)",
                                    model_name)),
      registry_(std::move(registry)),
      omit_(std::move(omit)) {}

std::string SimMetrics::Serialize() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::erase_if(families,
                [this](const prometheus::MetricFamily& f) { return omit_.count(f.name) > 0; });
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace crest::sim
