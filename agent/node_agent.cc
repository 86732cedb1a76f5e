#include "agent/node_agent.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/time_util.h"
#include "spdlog/spdlog.h"

#include "agent/benchmark_options.h"
#include "agent/daemon_metrics.h"
#include "agent/pinning.h"
#include "agent/request_validation.h"
#include "agent/topology.h"
#include "common/cpu_list.h"
#include "common/file_util.h"
#include "common/status.h"
#include "common/version.h"

namespace crest::agent {
namespace {

std::vector<std::string> SplitCells(absl::string_view line) {
  std::vector<std::string> cells;
  for (absl::string_view c : absl::StrSplit(line, '|')) {
    cells.emplace_back(absl::StripAsciiWhitespace(c));
  }
  return cells;
}

}  // namespace

// npu-smi info prints two rows per NPU:
// | 0     910B3               | OK            | 93.5        45                0    / 0 | | 0 |
// 0000:C1:00.0  | 0           0    / 0          3379 / 65536         |
std::vector<crest::v1::NpuDevice> ParseNpuSmiInfo(const std::string& text) {
  std::vector<crest::v1::NpuDevice> out;
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    std::vector<std::string> cells = SplitCells(lines[i]);
    if (cells.size() < 4) continue;
    std::vector<std::string> first = absl::StrSplit(cells[1], ' ', absl::SkipWhitespace());
    uint32_t id = 0;
    if (first.size() != 2 || !absl::SimpleAtoi(first[0], &id)) continue;
    if (cells[2].empty() || absl::ascii_isdigit(static_cast<unsigned char>(cells[2][0]))) continue;
    crest::v1::NpuDevice d;
    d.set_id(id);
    d.set_name(first[1]);
    d.set_health(cells[2]);
    std::vector<std::string> next = SplitCells(lines[i + 1]);
    if (next.size() >= 4) {
      // The last "used / total" pair of the second row is HBM in MB.
      std::vector<std::string> parts = absl::StrSplit(next[3], '/');
      if (parts.size() >= 2) {
        std::vector<std::string> used =
            absl::StrSplit(parts[parts.size() - 2], ' ', absl::SkipWhitespace());
        uint64_t u = 0;
        uint64_t t = 0;
        if (!used.empty() && absl::SimpleAtoi(used.back(), &u) &&
            absl::SimpleAtoi(absl::StripAsciiWhitespace(parts.back()), &t)) {
          d.set_hbm_used_mib(u);
          d.set_hbm_total_mib(t);
        }
      }
    }
    out.push_back(d);
    ++i;
  }
  return out;
}

NodeAgent::NodeAgent(NodeAgentOptions options, AgentConfig config, const Clock* clock,
                     HostTuner::CpupowerRunner cpupower, BenchmarkRunner benchmark)
    : options_(std::move(options)),
      config_(std::move(config)),
      clock_(clock),
      tuner_(options_.sysfs_root, options_.state_dir, std::move(cpupower)),
      metrics_(options_.node_name),
      benchmark_(std::move(benchmark)),
      supervisor_(config_, options_.state_dir, clock) {
  supervisor_.SetStateListener([this](const crest::v1::DaemonStatus& status) {
    metrics_.SetDaemonStatus(status);
    DaemonSupervisor::StateListener extra;
    {
      absl::MutexLock lock(&listener_mu_);
      extra = extra_listener_;
    }
    if (extra) extra(status);
  });
}

NodeAgent::~NodeAgent() = default;

void NodeAgent::SetDaemonListener(DaemonSupervisor::StateListener listener) {
  absl::MutexLock lock(&listener_mu_);
  extra_listener_ = std::move(listener);
}

absl::Status NodeAgent::Recover() {
  CREST_RETURN_IF_ERROR(supervisor_.RecoverAtStart());
  if (tuner_.HasRecord()) {
    spdlog::warn("a previous agent left host tuning applied; restoring it");
    CREST_RETURN_IF_ERROR(tuner_.Restore().status());
  }
  metrics_.SetHostState(tuner_.State());
  return absl::OkStatus();
}

void NodeAgent::Shutdown() {
  supervisor_.Stop(std::nullopt);
  if (tuner_.HasRecord()) {
    auto restored = tuner_.Restore();
    if (!restored.ok()) {
      spdlog::error("restoring host tuning: {}", std::string(restored.status().message()));
    } else {
      spdlog::info("host tuning restored");
    }
  }
}

absl::StatusOr<crest::v1::NodeInfo> NodeAgent::GetNodeInfo() {
  CREST_ASSIGN_OR_RETURN(Topology topology, ReadTopology(options_.sysfs_root));
  crest::v1::NodeInfo info;
  info.set_node_name(options_.node_name);
  info.set_agent_version(kVersion);
  info.set_cpu_count(topology.cpu_count);
  for (uint32_t c : topology.online_cpus) info.add_online_cpus(c);
  for (const NumaNodeInfo& n : topology.numa_nodes) {
    crest::v1::NumaNode* node = info.add_numa_nodes();
    node->set_id(n.id);
    for (uint32_t c : n.cpus) node->add_cpus(c);
    node->set_cpu_list(FormatCpuList(n.cpus));
  }
  if (options_.npu_smi.empty()) {
    info.set_npu_note("npu-smi not found");
  } else {
    SpawnOptions smi;
    smi.argv = {options_.npu_smi, "info"};
    auto out = RunCommand(smi, absl::Seconds(20));
    if (!out.ok() || out->exit.code != 0) {
      info.set_npu_note(
          absl::StrCat("npu-smi info failed: ", out.ok() ? out->output.substr(0, 200)
                                                         : std::string(out.status().message())));
    } else {
      for (const crest::v1::NpuDevice& d : ParseNpuSmiInfo(out->output)) *info.add_npus() = d;
      if (info.npus().empty()) info.set_npu_note("npu-smi info listed no NPU");
    }
  }
  *info.mutable_host() = tuner_.State();
  for (const auto& [k, v] : options_.labels) (*info.mutable_labels())[k] = v;
  info.set_backend(config_.backend);
  for (auto& l : PublishedParameterLimits(config_)) *info.add_parameter_limits() = std::move(l);
  for (auto& l : PublishedBenchmarkLimits()) *info.add_benchmark_limits() = std::move(l);
  return info;
}

absl::StatusOr<crest::v1::HostTuningReply> NodeAgent::ApplyHostTuning(
    const crest::v1::ApplyHostTuningRequest& request) {
  crest::v1::HostState state = tuner_.State();
  CREST_RETURN_IF_ERROR(
      ValidateHostTuning(request, tuner_.AvailableGovernors(),
                         state.governor_support() == crest::v1::SETTING_SUPPORTED));
  auto reply = tuner_.Apply(request.governor(), request.thp());
  if (reply.ok()) metrics_.SetHostState(reply->host());
  return reply;
}

absl::StatusOr<crest::v1::HostTuningReply> NodeAgent::RestoreHostTuning() {
  auto reply = tuner_.Restore();
  if (reply.ok()) metrics_.SetHostState(reply->host());
  return reply;
}

absl::StatusOr<StartParams> NodeAgent::PrepareStart(const crest::v1::StartDaemonRequest& request) {
  CREST_RETURN_IF_ERROR(ValidateStartRequest(request));
  // The one parse of config.json for this start: the supervisor writes the
  // text and reports the view it is handed.
  CREST_ASSIGN_OR_RETURN(MindieConfig config_json,
                         ConfigJsonFile(config_.config_json, options_.state_dir).Load());
  CREST_ASSIGN_OR_RETURN(std::vector<ScheduleValue> values,
                         ValidateOverrides(request.overrides(), config_, config_json.view()));
  for (const ScheduleValue& value : values) {
    absl::Status set = config_json.SetSchedule(value);
    if (!set.ok()) return Annotate(set, "writing config.json");
  }
  StartParams params;
  params.config_json = std::move(config_json);
  CREST_ASSIGN_OR_RETURN(Topology topology, ReadTopology(options_.sysfs_root));
  CREST_ASSIGN_OR_RETURN(params.cpus, ResolvePinning(request.pinning(), topology));
  params.replace_running = request.replace_running();
  if (request.has_start_timeout()) {
    params.start_timeout = absl::Seconds(request.start_timeout().seconds()) +
                           absl::Nanoseconds(request.start_timeout().nanos());
  }
  params.stream_log = request.stream_log();
  return params;
}

absl::Status NodeAgent::StartDaemon(const StartParams& params,
                                    const DaemonSupervisor::EventSink& sink,
                                    const std::atomic<bool>* cancel) {
  return supervisor_.Start(params, sink, cancel);
}

absl::StatusOr<crest::v1::StopDaemonReply> NodeAgent::StopDaemon(
    const crest::v1::StopDaemonRequest& request) {
  CREST_RETURN_IF_ERROR(ValidateStopRequest(request));
  std::optional<absl::Duration> grace;
  if (request.has_grace()) {
    grace = absl::Seconds(request.grace().seconds()) + absl::Nanoseconds(request.grace().nanos());
  }
  return supervisor_.Stop(grace);
}

crest::v1::DaemonStatus NodeAgent::GetDaemonStatus() const { return supervisor_.Status(); }

absl::StatusOr<loadgen::RunOptions> NodeAgent::PrepareBenchmark(
    const crest::v1::RunBenchmarkRequest& request) {
  CREST_RETURN_IF_ERROR(ValidateBenchmarkSpec(request.spec()));
  crest::v1::DaemonStatus status = supervisor_.Status();
  if (status.state() != crest::v1::DAEMON_READY) {
    return absl::FailedPreconditionError("no daemon is ready on this node (StartDaemon first)");
  }
  CREST_ASSIGN_OR_RETURN(MindieConfigView view, supervisor_.CurrentConfig());
  CREST_ASSIGN_OR_RETURN(Topology topology, ReadTopology(options_.sysfs_root));
  return MakeRunOptions(request.spec(), view, options_.datasets_dir,
                        LoadGeneratorCpus(topology, supervisor_.PinnedCpus()), config_.ca_file);
}

absl::StatusOr<crest::v1::BenchmarkResult> NodeAgent::RunBenchmark(
    const loadgen::RunOptions& options, const loadgen::ProgressCallback& progress,
    const std::atomic<bool>* cancel) {
  if (benchmark_running_.exchange(true)) {
    return absl::FailedPreconditionError("a benchmark is already running on this node");
  }
  spdlog::info("benchmark: {} concurrency {} rate {} requests {} on CPUs {}",
               options.target.base_url, options.spec.concurrency(), options.spec.request_rate(),
               options.spec.request_count(),
               options.cpus.empty() ? "any" : FormatCpuList(options.cpus));
  // The daemon's own counters from just after warm-up to just after the run.
  std::optional<DaemonMetricsRecorder> daemon_metrics;
  loadgen::RunOptions run = options;
  if (auto view = supervisor_.CurrentConfig(); view.ok()) {
    daemon_metrics.emplace(MetricsFetcher(view->MetricsUrl(), config_.ca_file),
                           config_.daemon_metrics_period);
    run.on_measured_start = [&daemon_metrics] { daemon_metrics->Begin(); };
  }
  // Which daemon the run measured: runs that change only client parameters
  // reuse one daemon, and the controller's record shows it.
  const int32_t daemon_pid = supervisor_.Status().pid();
  metrics_.BenchmarkStarted();
  const loadgen::ProgressCallback observed = [&](const crest::v1::BenchmarkProgress& p) {
    metrics_.BenchmarkProgress(p);
    if (progress) progress(p);
  };
  auto out = benchmark_(run, observed, cancel);
  std::optional<crest::v1::DaemonRunMetrics> daemon;
  if (daemon_metrics) daemon = daemon_metrics->End();
  benchmark_running_ = false;
  if (!out.ok()) {
    metrics_.RecordBenchmark(nullptr, false, clock_->Now());
    return out.status();
  }
  if (daemon) {
    if (!daemon->error().empty()) spdlog::warn("daemon metrics: {}", daemon->error());
    *out->result.mutable_daemon() = *std::move(daemon);
  }
  out->result.set_daemon_pid(daemon_pid);
  // A daemon that died mid-run leaves figures that are not the server's,
  // however many requests made it before.
  if (daemon_pid != 0) {
    if (auto gone = supervisor_.GoneSince(daemon_pid)) {
      spdlog::error("benchmark: {} during the run", *gone);
      out->result.set_daemon_gone(*gone);
    }
  }
  metrics_.RecordBenchmark(&out->result, true, clock_->Now());
  spdlog::info("benchmark done: GenerateSpeed {:.1f} tokens/s, {} ok, {} failed",
               out->result.generate_speed(), out->result.succeeded(), out->result.failed());
  return out->result;
}

}  // namespace crest::agent
