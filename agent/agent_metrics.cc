#include "agent/agent_metrics.h"

#include <google/protobuf/util/time_util.h>

#include <map>

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

AgentMetrics::AgentMetrics(const std::string& node)
    : registry_(std::make_shared<prometheus::Registry>()) {
  // The node as a constant label: every agent series says whose it is even
  // when scraped without relabelling.
  const std::map<std::string, std::string> node_label = {{"node", node}};
  daemon_state_ = &prometheus::BuildGauge()
                       .Name("crest_agent_daemon_state")
                       .Help("1 for the daemon's current state, 0 for the others")
                       .Labels(node_label)
                       .Register(*registry_);
  for (auto s : kDaemonStates) {
    daemon_state_->Add({{"state", StateName(s)}}).Set(s == crest::v1::DAEMON_STOPPED ? 1 : 0);
  }
  auto gauge = [&](const char* name, const char* help) {
    return &prometheus::BuildGauge()
                .Name(name)
                .Help(help)
                .Labels(node_label)
                .Register(*registry_)
                .Add({});
  };
  daemon_starts_ = &prometheus::BuildCounter()
                        .Name("crest_agent_daemon_starts_total")
                        .Help("Daemons this agent started (each trial restarts it)")
                        .Labels(node_label)
                        .Register(*registry_)
                        .Add({});
  npu_block_num_ = gauge("crest_agent_daemon_npu_blocks",
                         "npuBlockNum (KV-cache blocks) the running daemon reported");
  running_ = gauge("crest_agent_benchmark_running", "1 while a benchmark runs on this node");
  live_done_ = gauge("crest_agent_benchmark_requests_done",
                     "Measured requests finished so far in the running (or last) benchmark");
  live_failed_ = gauge("crest_agent_benchmark_requests_failed",
                       "Measured requests failed so far in the running (or last) benchmark");
  live_planned_ = gauge("crest_agent_benchmark_requests_planned",
                        "Measured requests the running benchmark sends (0: bounded by time)");
  live_in_flight_ = gauge("crest_agent_benchmark_requests_in_flight",
                          "Requests sent and not yet answered by the running benchmark");
  live_tokens_per_second_ =
      gauge("crest_agent_benchmark_live_tokens_per_second",
            "Output tokens/s of the running benchmark over its last 5 seconds");
  generate_speed_ = gauge("crest_agent_last_benchmark_generate_speed_tokens_per_second",
                          "GenerateSpeed (output tokens/s, all clients) of the last benchmark");
  generate_speed_per_client_ =
      gauge("crest_agent_last_benchmark_generate_speed_per_client_tokens_per_second",
            "GenerateSpeedPerClient of the last benchmark");
  requests_per_second_ = gauge("crest_agent_last_benchmark_requests_per_second",
                               "Completed requests/s (QPS) of the last benchmark");
  first_token_ = gauge("crest_agent_last_benchmark_first_token_average_seconds",
                       "Average first-token time of the last benchmark");
  decode_ = gauge("crest_agent_last_benchmark_decode_average_seconds",
                  "Average time between tokens of the last benchmark");
  last_succeeded_ =
      gauge("crest_agent_last_benchmark_requests_succeeded", "Requests the last benchmark got");
  last_failed_ = gauge("crest_agent_last_benchmark_requests_failed",
                       "Requests of the last benchmark that failed");
  last_end_ = gauge("crest_agent_last_benchmark_end_timestamp_seconds",
                    "Unix time the last benchmark ended (ok or not)");
  preemptions_ = &prometheus::BuildGauge()
                      .Name("crest_agent_last_benchmark_preemptions")
                      .Help(
                          "Requests the daemon preempted during the last benchmark (absent "
                          "when the daemon does not publish it)")
                      .Labels(node_label)
                      .Register(*registry_);
  benchmarks_ = &prometheus::BuildCounter()
                     .Name("crest_agent_benchmarks_total")
                     .Help("Benchmarks run, by result")
                     .Labels(node_label)
                     .Register(*registry_);
  for (const char* result : {"ok", "error"}) benchmarks_->Add({{"result", result}});
  host_tuned_ = gauge("crest_agent_host_tuned",
                      "1 while host tuning (governor/THP) is applied and not yet restored");
  host_setting_ = &prometheus::BuildGauge()
                       .Name("crest_agent_host_setting")
                       .Help("1 for the current governor / THP mode")
                       .Labels(node_label)
                       .Register(*registry_);
}

void AgentMetrics::SetDaemonStatus(const crest::v1::DaemonStatus& status) {
  for (auto s : kDaemonStates) {
    daemon_state_->Add({{"state", StateName(s)}}).Set(status.state() == s ? 1 : 0);
  }
  {
    absl::MutexLock lock(&mu_);
    if (status.restarts() > daemon_starts_seen_) {
      daemon_starts_->Increment(static_cast<double>(status.restarts() - daemon_starts_seen_));
      daemon_starts_seen_ = status.restarts();
    }
  }
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

void AgentMetrics::BenchmarkStarted() {
  absl::MutexLock lock(&mu_);
  samples_.clear();
  running_->Set(1);
  for (auto* g :
       {live_done_, live_failed_, live_planned_, live_in_flight_, live_tokens_per_second_}) {
    g->Set(0);
  }
}

void AgentMetrics::BenchmarkProgress(const crest::v1::BenchmarkProgress& progress) {
  using google::protobuf::util::TimeUtil;
  const absl::Duration elapsed =
      absl::Nanoseconds(TimeUtil::DurationToNanoseconds(progress.elapsed()));
  // The run reports its average since the measured window began; tokens so
  // far follow from it, and their change over the last seconds is the live rate.
  const double tokens = progress.tokens_per_second() * absl::ToDoubleSeconds(elapsed);
  absl::MutexLock lock(&mu_);
  samples_.emplace_back(elapsed, tokens);
  while (samples_.size() > 2 && samples_.front().first < elapsed - kLiveWindow) {
    samples_.pop_front();
  }
  const auto& [first_at, first_tokens] = samples_.front();
  const double span = absl::ToDoubleSeconds(elapsed - first_at);
  live_tokens_per_second_->Set(span > 0 ? (tokens - first_tokens) / span
                                        : progress.tokens_per_second());
  live_done_->Set(static_cast<double>(progress.requests_done()));
  live_failed_->Set(static_cast<double>(progress.requests_failed()));
  live_planned_->Set(static_cast<double>(progress.requests_total()));
  live_in_flight_->Set(static_cast<double>(progress.requests_in_flight()));
}

void AgentMetrics::RecordBenchmark(const crest::v1::BenchmarkResult* result, bool ok,
                                   absl::Time ended) {
  benchmarks_->Add({{"result", ok ? "ok" : "error"}}).Increment();
  running_->Set(0);
  live_in_flight_->Set(0);
  live_tokens_per_second_->Set(0);
  last_end_->Set(absl::ToDoubleSeconds(ended - absl::UnixEpoch()));
  if (result == nullptr) return;
  generate_speed_->Set(result->generate_speed());
  generate_speed_per_client_->Set(result->generate_speed_per_client());
  requests_per_second_->Set(result->qps());
  first_token_->Set(result->first_token_time().average_ms() / 1000);
  decode_->Set(result->decode_time().average_ms() / 1000);
  last_succeeded_->Set(static_cast<double>(result->succeeded()));
  last_failed_->Set(static_cast<double>(result->failed()));
  live_done_->Set(static_cast<double>(result->succeeded()));
  if (result->has_daemon() && result->daemon().has_preemptions()) {
    preemptions_->Add({}).Set(static_cast<double>(result->daemon().preemptions()));
  }
}

std::string AgentMetrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace crest::agent
