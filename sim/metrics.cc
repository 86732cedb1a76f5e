#include "sim/metrics.h"

#include <prometheus/text_serializer.h>

namespace crest::sim {
namespace {

prometheus::Gauge& MakeGauge(prometheus::Registry& r, const std::string& name,
                             const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}
prometheus::Counter& MakeCounter(prometheus::Registry& r, const std::string& name,
                                 const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
}

}  // namespace

SimMetrics::SimMetrics() : SimMetrics(std::make_shared<prometheus::Registry>()) {}

SimMetrics::SimMetrics(std::shared_ptr<prometheus::Registry> registry)
    : running(MakeGauge(*registry, "num_requests_running", "Sequences in the running batch")),
      waiting(MakeGauge(*registry, "num_requests_waiting", "Sequences waiting for prefill")),
      kv_used(MakeGauge(*registry, "kv_cache_blocks_used", "KV-cache blocks in use")),
      kv_total(MakeGauge(*registry, "kv_cache_blocks_usable", "Usable KV-cache blocks")),
      cache_usage(MakeGauge(*registry, "npu_cache_usage_perc", "Fraction of KV blocks in use")),
      generated(MakeCounter(*registry, "generation_tokens_total", "Generated tokens")),
      prompt(MakeCounter(*registry, "prompt_tokens_total", "Prompt tokens of accepted requests")),
      preemptions(MakeCounter(*registry, "num_preemptions_total", "Sequences preempted")),
      requests(MakeCounter(*registry, "request_received_total", "Generation requests received")),
      finished(MakeCounter(*registry, "request_success_total", "Requests finished")),
      registry_(std::move(registry)) {}

std::string SimMetrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace crest::sim
