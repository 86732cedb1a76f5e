#include "agent/agent_metrics.h"

#include <google/protobuf/util/time_util.h>

#include <map>
#include <string>
#include <utility>

#include "prometheus/text_serializer.h"

namespace crest::agent {
namespace {

const char* StateName(crest::v1::DaemonState s) {
  switch (s) {
    case crest::v1::DAEMON_STARTING:
      return "starting";
    case crest::v1::DAEMON_READY:
      return "ready";
    case crest::v1::DAEMON_FAILED:
      return "failed";
    case crest::v1::DAEMON_STOPPING:
      return "stopping";
    default:
      return "stopped";
  }
}

constexpr crest::v1::DaemonState kDaemonStates[] = {
    crest::v1::DAEMON_STOPPED, crest::v1::DAEMON_STARTING, crest::v1::DAEMON_READY,
    crest::v1::DAEMON_FAILED, crest::v1::DAEMON_STOPPING};

}  // namespace

const AgentMetrics::SlotGauge AgentMetrics::kSlotGauges[] = {
    {"crest_agent_daemon_npu_blocks", "npuBlockNum (KV-cache blocks) the running daemon reported",
     &SlotSeries::npu_block_num},
    {"crest_agent_benchmark_running", "1 while a benchmark runs in this slot",
     &SlotSeries::running},
    {"crest_agent_benchmark_requests_done",
     "Measured requests finished so far in the running (or last) benchmark",
     &SlotSeries::live_done},
    {"crest_agent_benchmark_requests_failed",
     "Measured requests failed so far in the running (or last) benchmark",
     &SlotSeries::live_failed},
    {"crest_agent_benchmark_requests_planned",
     "Measured requests the running benchmark sends (0: bounded by time)",
     &SlotSeries::live_planned},
    {"crest_agent_benchmark_requests_in_flight",
     "Requests sent and not yet answered by the running benchmark", &SlotSeries::live_in_flight},
    {"crest_agent_benchmark_live_tokens_per_second",
     "Output tokens/s of the running benchmark over its last 5 seconds",
     &SlotSeries::live_tokens_per_second},
    {"crest_agent_last_benchmark_generate_speed_tokens_per_second",
     "GenerateSpeed (output tokens/s, all clients) of the last benchmark",
     &SlotSeries::generate_speed},
    {"crest_agent_last_benchmark_generate_speed_per_client_tokens_per_second",
     "GenerateSpeedPerClient of the last benchmark", &SlotSeries::generate_speed_per_client},
    {"crest_agent_last_benchmark_requests_per_second",
     "Completed requests/s (QPS) of the last benchmark", &SlotSeries::requests_per_second},
    {"crest_agent_last_benchmark_first_token_average_seconds",
     "Average first-token time of the last benchmark", &SlotSeries::first_token},
    {"crest_agent_last_benchmark_decode_average_seconds",
     "Average time between tokens of the last benchmark", &SlotSeries::decode},
    {"crest_agent_last_benchmark_requests_succeeded", "Requests the last benchmark got",
     &SlotSeries::last_succeeded},
    {"crest_agent_last_benchmark_requests_failed", "Requests of the last benchmark that failed",
     &SlotSeries::last_failed},
    {"crest_agent_last_benchmark_end_timestamp_seconds",
     "Unix time the last benchmark ended (ok or not)", &SlotSeries::last_end},
};

AgentMetrics::AgentMetrics(const std::string& node)
    : registry_(std::make_shared<prometheus::Registry>()),
      // The node as a constant label: every agent series says whose it is
      // even when scraped without relabelling.
      node_label_({{"node", node}}) {
  daemon_state_ = &prometheus::BuildGauge()
                       .Name("crest_agent_daemon_state")
                       .Help("1 for the slot's daemon's current state, 0 for the others")
                       .Labels(node_label_)
                       .Register(*registry_);
  daemon_starts_ = &prometheus::BuildCounter()
                        .Name("crest_agent_daemon_starts_total")
                        .Help("Daemons this agent started in the slot (each trial restarts it)")
                        .Labels(node_label_)
                        .Register(*registry_);
  for (const auto& g : kSlotGauges) {
    slot_gauges_.push_back(&prometheus::BuildGauge()
                                .Name(g.name)
                                .Help(g.help)
                                .Labels(node_label_)
                                .Register(*registry_));
  }
  preemptions_ = &prometheus::BuildGauge()
                      .Name("crest_agent_last_benchmark_preemptions")
                      .Help(
                          "Requests the daemon preempted during the last benchmark (absent "
                          "when the daemon does not publish it)")
                      .Labels(node_label_)
                      .Register(*registry_);
  benchmarks_ = &prometheus::BuildCounter()
                     .Name("crest_agent_benchmarks_total")
                     .Help("Benchmarks run, by result")
                     .Labels(node_label_)
                     .Register(*registry_);
  for (const char* result : {"ok", "error"}) benchmarks_->Add({{"result", result}});
  host_tuned_ = &prometheus::BuildGauge()
                     .Name("crest_agent_host_tuned")
                     .Help("1 while host tuning (governor/THP) is applied and not yet restored")
                     .Labels(node_label_)
                     .Register(*registry_)
                     .Add({});
  host_setting_ = &prometheus::BuildGauge()
                       .Name("crest_agent_host_setting")
                       .Help("1 for the current governor / THP mode")
                       .Labels(node_label_)
                       .Register(*registry_);
  absl::MutexLock lock(&mu_);
  Slot(0);
}

AgentMetrics::SlotSeries& AgentMetrics::Slot(uint32_t slot) {
  auto it = slots_.find(slot);
  if (it != slots_.end()) return it->second;
  SlotSeries& s = slots_[slot];
  s.label = {{"slot", std::to_string(slot)}};
  SetDaemonState(s, crest::v1::DAEMON_STOPPED);
  s.daemon_starts = &daemon_starts_->Add(s.label);
  for (size_t i = 0; i < slot_gauges_.size(); ++i) {
    s.*(kSlotGauges[i].handle) = &slot_gauges_[i]->Add(s.label);
  }
  return s;
}

void AgentMetrics::SetDaemonState(const SlotSeries& s, crest::v1::DaemonState current) {
  for (auto state : kDaemonStates) {
    auto labels = s.label;
    labels["state"] = StateName(state);
    daemon_state_->Add(labels).Set(state == current ? 1 : 0);
  }
}

void AgentMetrics::SetDaemonStatus(uint32_t slot, const crest::v1::DaemonStatus& status) {
  absl::MutexLock lock(&mu_);
  SlotSeries& s = Slot(slot);
  SetDaemonState(s, status.state());
  if (status.restarts() > s.daemon_starts_seen) {
    s.daemon_starts->Increment(static_cast<double>(status.restarts() - s.daemon_starts_seen));
    s.daemon_starts_seen = status.restarts();
  }
  s.npu_block_num->Set(static_cast<double>(status.npu_block_num()));
}

void AgentMetrics::SetHostState(const crest::v1::HostState& state) {
  host_tuned_->Set(state.tuned() ? 1 : 0);
  // One series per setting and value; the previous value's series drops to 0.
  absl::MutexLock lock(&mu_);
  if (!last_governor_.empty()) {
    host_setting_->Add({{"setting", "governor"}, {"value", last_governor_}}).Set(0);
  }
  if (!last_thp_.empty()) host_setting_->Add({{"setting", "thp"}, {"value", last_thp_}}).Set(0);
  last_governor_ = state.governor().empty() ? "unsupported" : state.governor();
  last_thp_ = state.thp().empty() ? "unsupported" : state.thp();
  host_setting_->Add({{"setting", "governor"}, {"value", last_governor_}}).Set(1);
  host_setting_->Add({{"setting", "thp"}, {"value", last_thp_}}).Set(1);
}

void AgentMetrics::BenchmarkStarted(uint32_t slot) {
  absl::MutexLock lock(&mu_);
  SlotSeries& s = Slot(slot);
  s.samples.clear();
  s.running->Set(1);
  for (auto* g :
       {s.live_done, s.live_failed, s.live_planned, s.live_in_flight, s.live_tokens_per_second}) {
    g->Set(0);
  }
}

void AgentMetrics::BenchmarkProgress(uint32_t slot, const crest::v1::BenchmarkProgress& progress) {
  using google::protobuf::util::TimeUtil;
  const absl::Duration elapsed =
      absl::Nanoseconds(TimeUtil::DurationToNanoseconds(progress.elapsed()));
  // The run reports its average since the measured window began; tokens so
  // far follow from it, and their change over the last seconds is the live rate.
  const double tokens = progress.tokens_per_second() * absl::ToDoubleSeconds(elapsed);
  absl::MutexLock lock(&mu_);
  SlotSeries& s = Slot(slot);
  s.samples.emplace_back(elapsed, tokens);
  while (s.samples.size() > 2 && s.samples.front().first < elapsed - kLiveWindow) {
    s.samples.pop_front();
  }
  const auto& [first_at, first_tokens] = s.samples.front();
  const double span = absl::ToDoubleSeconds(elapsed - first_at);
  s.live_tokens_per_second->Set(span > 0 ? (tokens - first_tokens) / span
                                         : progress.tokens_per_second());
  s.live_done->Set(static_cast<double>(progress.requests_done()));
  s.live_failed->Set(static_cast<double>(progress.requests_failed()));
  s.live_planned->Set(static_cast<double>(progress.requests_total()));
  s.live_in_flight->Set(static_cast<double>(progress.requests_in_flight()));
}

void AgentMetrics::RecordBenchmark(uint32_t slot, const crest::v1::BenchmarkResult* result, bool ok,
                                   absl::Time ended) {
  benchmarks_->Add({{"result", ok ? "ok" : "error"}}).Increment();
  absl::MutexLock lock(&mu_);
  SlotSeries& s = Slot(slot);
  s.running->Set(0);
  s.live_in_flight->Set(0);
  s.live_tokens_per_second->Set(0);
  s.last_end->Set(absl::ToDoubleSeconds(ended - absl::UnixEpoch()));
  if (result == nullptr) return;
  s.generate_speed->Set(result->generate_speed());
  s.generate_speed_per_client->Set(result->generate_speed_per_client());
  s.requests_per_second->Set(result->qps());
  s.first_token->Set(result->first_token_time().average_ms() / 1000);
  s.decode->Set(result->decode_time().average_ms() / 1000);
  s.last_succeeded->Set(static_cast<double>(result->succeeded()));
  s.last_failed->Set(static_cast<double>(result->failed()));
  s.live_done->Set(static_cast<double>(result->succeeded()));
  if (result->has_daemon() && result->daemon().has_preemptions()) {
    preemptions_->Add(s.label).Set(static_cast<double>(result->daemon().preemptions()));
  }
}

std::string AgentMetrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace crest::agent
