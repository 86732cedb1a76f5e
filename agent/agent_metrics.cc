#include "agent/agent_metrics.h"

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

}  // namespace

AgentMetrics::AgentMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  daemon_state_ = &prometheus::BuildGauge()
                       .Name("crest_agent_daemon_state")
                       .Help("1 for the daemon's current state")
                       .Register(*registry_);
  for (auto s : {crest::v1::DAEMON_STOPPED, crest::v1::DAEMON_STARTING, crest::v1::DAEMON_READY,
                 crest::v1::DAEMON_FAILED, crest::v1::DAEMON_STOPPING}) {
    daemon_state_->Add({{"state", StateName(s)}}).Set(s == crest::v1::DAEMON_STOPPED ? 1 : 0);
  }
  auto gauge = [this](const char* name, const char* help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(*registry_).Add({});
  };
  daemon_restarts_ = gauge("crest_agent_daemon_starts", "Daemons started by this agent");
  npu_block_num_ = gauge("crest_agent_daemon_npu_block_num", "npuBlockNum of the running daemon");
  generate_speed_ = gauge("crest_agent_benchmark_generate_speed",
                          "GenerateSpeed (output tokens/s) of the last benchmark");
  generate_speed_per_client_ = gauge("crest_agent_benchmark_generate_speed_per_client",
                                     "GenerateSpeedPerClient of the last benchmark");
  qps_ = gauge("crest_agent_benchmark_qps", "Completed requests/s of the last benchmark");
  first_token_ms_ = gauge("crest_agent_benchmark_first_token_ms",
                          "Average first-token time (ms) of the last benchmark");
  decode_ms_ =
      gauge("crest_agent_benchmark_decode_ms", "Average decode time (ms) of the last benchmark");
  benchmarks_ = &prometheus::BuildCounter()
                     .Name("crest_agent_benchmarks_total")
                     .Help("Benchmarks run, by result")
                     .Register(*registry_);
  host_tuned_ = gauge("crest_agent_host_tuned", "1 while a host tuning is applied");
  host_setting_ = &prometheus::BuildGauge()
                       .Name("crest_agent_host_setting")
                       .Help("1 for the current governor / THP mode")
                       .Register(*registry_);
}

void AgentMetrics::SetDaemonStatus(const crest::v1::DaemonStatus& status) {
  for (auto s : {crest::v1::DAEMON_STOPPED, crest::v1::DAEMON_STARTING, crest::v1::DAEMON_READY,
                 crest::v1::DAEMON_FAILED, crest::v1::DAEMON_STOPPING}) {
    daemon_state_->Add({{"state", StateName(s)}}).Set(status.state() == s ? 1 : 0);
  }
  daemon_restarts_->Set(static_cast<double>(status.restarts()));
  npu_block_num_->Set(static_cast<double>(status.npu_block_num()));
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

void AgentMetrics::RecordBenchmark(const crest::v1::BenchmarkResult* result, bool ok) {
  benchmarks_->Add({{"result", ok ? "ok" : "error"}}).Increment();
  if (result == nullptr) return;
  generate_speed_->Set(result->generate_speed());
  generate_speed_per_client_->Set(result->generate_speed_per_client());
  qps_->Set(result->qps());
  first_token_ms_->Set(result->first_token_time().average_ms());
  decode_ms_->Set(result->decode_time().average_ms());
}

std::string AgentMetrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace crest::agent
