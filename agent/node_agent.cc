#include "agent/node_agent.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <optional>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"
#include "spdlog/spdlog.h"

#include "agent/benchmark_options.h"
#include "agent/daemon_metrics.h"
#include "agent/pinning.h"
#include "agent/request_validation.h"
#include "common/cpu_list.h"
#include "common/file_util.h"
#include "common/status.h"
#include "common/topology.h"
#include "common/version.h"

namespace crest::agent {

NodeAgent::NodeAgent(NodeAgentOptions options, AgentConfig config, const Clock* clock,
                     HostTuner::CpupowerRunner cpupower, BenchmarkRunner benchmark)
    : options_(std::move(options)),
      config_(std::move(config)),
      clock_(clock),
      tuner_(options_.sysfs_root, options_.state_dir, std::move(cpupower)),
      metrics_(options_.node_name),
      benchmark_(std::move(benchmark)) {
  plan_.cpu_rule = "request";
  if (!config_.slots) {
    SlotRuntime lone;
    lone.config = config_;
    lone.state_dir = options_.state_dir;
    AddSlot(std::move(lone));
  }
}

NodeAgent::~NodeAgent() = default;

void NodeAgent::AddSlot(SlotRuntime runtime) {
  auto slot = std::make_unique<Slot>();
  slot->runtime = std::move(runtime);
  slot->supervisor =
      std::make_unique<DaemonSupervisor>(slot->runtime.config, slot->runtime.state_dir, clock_);
  const uint32_t index = slot->runtime.layout.index;
  slot->supervisor->SetStateListener([this, index](const crest::v1::DaemonStatus& status) {
    crest::v1::DaemonStatus of_slot = status;
    of_slot.set_slot(index);
    metrics_.SetDaemonStatus(index, of_slot);
    DaemonSupervisor::StateListener extra;
    {
      absl::MutexLock lock(&listener_mu_);
      extra = extra_listener_;
    }
    if (extra) extra(of_slot);
  });
  slots_.push_back(std::move(slot));
}

absl::StatusOr<NodeAgent::Slot*> NodeAgent::FindSlot(uint32_t index) const {
  if (index >= slots_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot ", index, ": this node has ", slots_.size(), " slot",
                     slots_.size() == 1 ? " (0)" : absl::StrCat("s (0..", slots_.size() - 1, ")")));
  }
  return slots_[index].get();
}

absl::StatusOr<NpuSmiInfo> NodeAgent::ListNpus(std::string* note) const {
  if (options_.npu_smi.empty()) {
    *note = "npu-smi not found";
    return NpuSmiInfo{};
  }
  SpawnOptions smi;
  smi.argv = {options_.npu_smi, "info"};
  smi.env = options_.npu_smi_env;
  auto out = RunCommand(smi, absl::Seconds(20));
  if (!out.ok() || out->exit.code != 0) {
    *note = absl::StrCat("npu-smi info failed: ", out.ok() ? out->output.substr(0, 200)
                                                           : std::string(out.status().message()));
    return NpuSmiInfo{};
  }
  CREST_ASSIGN_OR_RETURN(NpuSmiInfo npus, ParseNpuSmiInfo(out->output));
  if (npus.chips.empty()) *note = "npu-smi info listed no NPU";
  return npus;
}

std::map<uint32_t, uint32_t> NodeAgent::NpuNumaNodes(const Topology& topology,
                                                     const NpuSmiInfo& npus) const {
  std::map<uint32_t, uint32_t> out;
  if (options_.npu_smi.empty() || npus.chips.empty()) return out;
  SpawnOptions smi;
  smi.argv = {options_.npu_smi, "info", "-t", "topo"};
  smi.env = options_.npu_smi_env;
  auto run = RunCommand(smi, absl::Seconds(20));
  if (!run.ok() || run->exit.code != 0) {
    spdlog::warn("npu-smi info -t topo failed; the NPUs' NUMA nodes are unknown: {}",
                 run.ok() ? run->output.substr(0, 200) : std::string(run.status().message()));
    return out;
  }
  auto topo = ParseNpuSmiTopo(run->output);
  if (!topo.ok()) {
    spdlog::warn("the NPUs' NUMA nodes are unknown: {}", std::string(topo.status().message()));
    return out;
  }
  for (const auto& [device, cpus] : DeviceCpuAffinity(npus, *topo)) {
    for (const NumaNodeInfo& node : topology.numa_nodes) {
      if (std::binary_search(node.cpus.begin(), node.cpus.end(), cpus.front())) {
        out[device] = node.id;
      }
    }
  }
  return out;
}

absl::Status NodeAgent::SetUpSlots() {
  CREST_ASSIGN_OR_RETURN(Topology topology, ReadTopology(options_.sysfs_root));
  std::string note;
  // Slots name devices by device id (npuDeviceIds), never by npu-smi's NPU
  // (card) column: a 300I Duo's two chips share a card id.
  auto listed = ListNpus(&note);
  if (!listed.ok()) return Annotate(listed.status(), "slots: reading npu-smi info");
  const std::map<uint32_t, uint32_t> nodes = NpuNumaNodes(topology, *listed);
  std::vector<HostNpu> npus;
  for (const NpuChip& chip : listed->chips) {
    auto node = nodes.find(chip.device_id);
    npus.push_back({chip.device_id,
                    node == nodes.end() ? std::nullopt : std::optional(node->second), chip.card_id,
                    chip.chip_id});
  }
  // The model's cards per slot: worldSize of the original config.json.
  CREST_ASSIGN_OR_RETURN(MindieConfig original,
                         ConfigJsonFile(config_.config_json, options_.state_dir).Load());
  const uint32_t world_size =
      original.view().world_size > 0 ? static_cast<uint32_t>(original.view().world_size) : 1;
  auto plan = PlanSlots(*config_.slots, npus, world_size, topology);
  if (!plan.ok()) {
    return Annotate(plan.status(), note.empty() ? "slots" : absl::StrCat("slots (", note, ")"));
  }
  CREST_ASSIGN_OR_RETURN(std::vector<SlotRuntime> runtimes,
                         PrepareSlots(config_, *plan, options_.state_dir));
  plan_ = *std::move(plan);
  for (SlotRuntime& r : runtimes) AddSlot(std::move(r));
  spdlog::info("{} daemon slots, CPUs by rule {}{}", slots_.size(), plan_.cpu_rule,
               plan_.cpu_note.empty() ? "" : absl::StrCat(" (", plan_.cpu_note, ")"));
  return absl::OkStatus();
}

std::vector<uint32_t> NodeAgent::ClientCpus(const Topology& topology) const {
  std::vector<uint32_t> daemons;
  for (const auto& slot : slots_) {
    std::vector<uint32_t> cpus = slot->supervisor->PinnedCpus();
    daemons.insert(daemons.end(), cpus.begin(), cpus.end());
  }
  return LoadGeneratorCpus(topology, daemons);
}

void NodeAgent::SetDaemonListener(DaemonSupervisor::StateListener listener) {
  absl::MutexLock lock(&listener_mu_);
  extra_listener_ = std::move(listener);
}

absl::Status NodeAgent::Recover() {
  // Whatever a previous agent ran, with or without slots: the lone daemon of
  // the state folder and every slot's.
  if (slots_.empty()) {
    CREST_RETURN_IF_ERROR(DaemonSupervisor(config_, options_.state_dir, clock_).RecoverAtStart());
  } else {
    CREST_RETURN_IF_ERROR(slots_.front()->supervisor->RecoverAtStart());
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(options_.state_dir + "/slots", ec)) {
    if (!entry.is_directory()) continue;
    AgentConfig left = config_;
    left.config_json = entry.path().string() + "/conf/config.json";
    CREST_RETURN_IF_ERROR(DaemonSupervisor(left, entry.path().string(), clock_).RecoverAtStart());
  }
  if (config_.slots) CREST_RETURN_IF_ERROR(SetUpSlots());
  if (tuner_.HasRecord()) {
    spdlog::warn("a previous agent left host tuning applied; restoring it");
    CREST_RETURN_IF_ERROR(tuner_.Restore().status());
  }
  metrics_.SetHostState(tuner_.State());
  return absl::OkStatus();
}

void NodeAgent::Shutdown() {
  for (const auto& slot : slots_) slot->supervisor->Stop(std::nullopt);
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
  std::string note;
  auto npus = ListNpus(&note);
  if (npus.ok()) {
    for (crest::v1::NpuDevice& d : ToNpuDevices(*npus)) *info.add_npus() = std::move(d);
  } else {
    note = std::string(npus.status().message());
  }
  info.set_npu_note(note);
  for (const auto& slot : slots_) {
    const SlotRuntime& r = slot->runtime;
    crest::v1::Slot* out = info.add_slots();
    out->set_index(r.layout.index);
    for (uint32_t n : r.layout.npus) out->add_npus(n);
    out->set_cpu_list(FormatCpuList(r.layout.cpus));
    out->set_port(static_cast<uint32_t>(r.port));
    out->set_management_port(static_cast<uint32_t>(r.management_port));
    out->set_metrics_port(static_cast<uint32_t>(r.metrics_port));
    out->set_config_json(r.config.config_json);
    *out->mutable_daemon() = GetDaemonStatus(r.layout.index);
  }
  info.set_slot_cpu_rule(plan_.cpu_rule);
  info.set_slot_cpu_note(plan_.cpu_note);
  info.set_benchmark_client_cpu_list(
      FormatCpuList(config_.slots ? plan_.client_cpus : ClientCpus(topology)));
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
  CREST_ASSIGN_OR_RETURN(Slot * slot, FindSlot(request.slot()));
  // The one parse of config.json for this start: the supervisor writes the
  // text and reports the view it is handed.
  CREST_ASSIGN_OR_RETURN(
      MindieConfig config_json,
      ConfigJsonFile(slot->runtime.config.config_json, slot->runtime.state_dir).Load());
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
  // The practice's odd-NUMA pinning on a node of slots: the slot's share.
  if (config_.slots && request.pinning().mode() == crest::v1::PINNING_ODD_NUMA) {
    params.cpus = slot->runtime.layout.cpus;
  }
  params.slot = request.slot();
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
  CREST_ASSIGN_OR_RETURN(Slot * slot, FindSlot(params.slot));
  return slot->supervisor->Start(params, sink, cancel);
}

absl::StatusOr<crest::v1::StopDaemonReply> NodeAgent::StopDaemon(
    const crest::v1::StopDaemonRequest& request) {
  CREST_RETURN_IF_ERROR(ValidateStopRequest(request));
  CREST_ASSIGN_OR_RETURN(Slot * slot, FindSlot(request.slot()));
  std::optional<absl::Duration> grace;
  if (request.has_grace()) {
    grace = absl::Seconds(request.grace().seconds()) + absl::Nanoseconds(request.grace().nanos());
  }
  crest::v1::StopDaemonReply reply = slot->supervisor->Stop(grace);
  return reply;
}

crest::v1::DaemonStatus NodeAgent::GetDaemonStatus(uint32_t slot) const {
  auto found = FindSlot(slot);
  if (!found.ok()) return {};
  crest::v1::DaemonStatus status = (*found)->supervisor->Status();
  status.set_slot(slot);
  return status;
}

absl::StatusOr<loadgen::RunOptions> NodeAgent::PrepareBenchmark(
    const crest::v1::RunBenchmarkRequest& request) {
  CREST_RETURN_IF_ERROR(ValidateBenchmarkSpec(request.spec()));
  CREST_ASSIGN_OR_RETURN(Slot * slot, FindSlot(request.slot()));
  crest::v1::DaemonStatus status = slot->supervisor->Status();
  if (status.state() != crest::v1::DAEMON_READY) {
    return absl::FailedPreconditionError(
        slots_.size() == 1
            ? std::string("no daemon is ready on this node (StartDaemon first)")
            : absl::StrCat("no daemon is ready in slot ", request.slot(), " (StartDaemon first)"));
  }
  CREST_ASSIGN_OR_RETURN(MindieConfigView view, slot->supervisor->CurrentConfig());
  CREST_ASSIGN_OR_RETURN(Topology topology, ReadTopology(options_.sysfs_root));
  // The clients run where no daemon of any slot does.
  std::vector<uint32_t> clients =
      config_.slots && !plan_.client_cpus.empty() ? plan_.client_cpus : ClientCpus(topology);
  // Of those, the ones this agent may run on (a container's cpuset).
  if (auto allowed = ReadAllowedCpus(::getpid()); allowed.ok() && !clients.empty()) {
    std::vector<uint32_t> usable;
    std::set_intersection(clients.begin(), clients.end(), allowed->begin(), allowed->end(),
                          std::back_inserter(usable));
    if (usable.empty()) {
      spdlog::warn("benchmark: the client CPUs {} are not this agent's ({}); not pinned",
                   FormatCpuList(clients), FormatCpuList(*allowed));
    }
    clients = std::move(usable);
  }
  return MakeRunOptions(request.spec(), view, options_.datasets_dir, std::move(clients),
                        config_.ca_file);
}

absl::StatusOr<crest::v1::BenchmarkResult> NodeAgent::RunBenchmark(
    uint32_t slot_index, const loadgen::RunOptions& options,
    const loadgen::ProgressCallback& progress, const std::atomic<bool>* cancel) {
  CREST_ASSIGN_OR_RETURN(Slot * slot, FindSlot(slot_index));
  DaemonSupervisor& supervisor = *slot->supervisor;
  if (slot->benchmark_running.exchange(true)) {
    return absl::FailedPreconditionError(
        slots_.size() == 1 ? std::string("a benchmark is already running on this node")
                           : absl::StrCat("a benchmark is already running in slot ", slot_index));
  }
  spdlog::info("benchmark: {} concurrency {} rate {} requests {} on CPUs {}",
               options.target.base_url, options.spec.concurrency(), options.spec.request_rate(),
               options.spec.request_count(),
               options.cpus.empty() ? "any" : FormatCpuList(options.cpus));
  // The daemon's own counters from just after warm-up to just after the run.
  std::optional<DaemonMetricsRecorder> daemon_metrics;
  loadgen::RunOptions run = options;
  if (auto view = supervisor.CurrentConfig(); view.ok()) {
    daemon_metrics.emplace(MetricsFetcher(view->MetricsUrl(), config_.ca_file),
                           config_.daemon_metrics_period);
    run.on_measured_start = [&daemon_metrics] { daemon_metrics->Begin(); };
  }
  // Which daemon the run measured: runs that change only client parameters
  // reuse one daemon, and the controller's record shows it.
  const int32_t daemon_pid = supervisor.Status().pid();
  metrics_.BenchmarkStarted(slot_index);
  const loadgen::ProgressCallback observed = [&](const crest::v1::BenchmarkProgress& p) {
    metrics_.BenchmarkProgress(slot_index, p);
    if (progress) progress(p);
  };
  auto out = benchmark_(run, observed, cancel);
  std::optional<crest::v1::DaemonRunMetrics> daemon;
  if (daemon_metrics) daemon = daemon_metrics->End();
  slot->benchmark_running = false;
  if (!out.ok()) {
    metrics_.RecordBenchmark(slot_index, nullptr, false, clock_->Now());
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
    if (auto gone = supervisor.GoneSince(daemon_pid)) {
      spdlog::error("benchmark: {} during the run", *gone);
      out->result.set_daemon_gone(*gone);
    }
  }
  metrics_.RecordBenchmark(slot_index, &out->result, true, clock_->Now());
  spdlog::info("benchmark done: GenerateSpeed {:.1f} tokens/s, {} ok, {} failed",
               out->result.generate_speed(), out->result.succeeded(), out->result.failed());
  return out->result;
}

}  // namespace crest::agent
