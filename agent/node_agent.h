// The node agent's logic behind the NodeAgent RPCs, free of gRPC: node info,
// host tuning, daemon start/stop/status and local benchmarks, each argument
// validated first. The daemons run in slots (slots.h, slot_setup.h), each
// with its own supervisor; an agent without `slots:` has one. Long operations block the calling
// (worker) thread; the gRPC layer (agent_service.h) runs them off its reactors.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "agent/agent_config.h"
#include "agent/agent_metrics.h"
#include "agent/daemon_supervisor.h"
#include "agent/host_tuner.h"
#include "agent/npu_smi.h"
#include "agent/slot_setup.h"
#include "agent/slots.h"
#include "common/clock.h"
#include "common/topology.h"
#include "crest/v1/agent.pb.h"
#include "crest/v1/benchmark.pb.h"
#include "loadgen/runner.h"

namespace crest::agent {

struct NodeAgentOptions {
  std::string node_name;
  std::string state_dir;
  std::string sysfs_root = "/sys";
  std::string datasets_dir;  // ShareDir()/datasets
  std::map<std::string, std::string> labels;
  std::string npu_smi;                             // path of npu-smi, empty when absent
  std::map<std::string, std::string> npu_smi_env;  // e.g. npu-smi-sim's host
};

// Runs a benchmark: loadgen::RunBenchmark in production, a fake in tests.
using BenchmarkRunner = std::function<absl::StatusOr<loadgen::RunOutput>(
    const loadgen::RunOptions&, const loadgen::ProgressCallback&, const std::atomic<bool>*)>;

class NodeAgent {
 public:
  NodeAgent(NodeAgentOptions options, AgentConfig config, const Clock* clock,
            HostTuner::CpupowerRunner cpupower, BenchmarkRunner benchmark);
  ~NodeAgent();

  // Crash recovery: restores host tuning and every config.json, and kills
  // every daemon a previous agent left behind, in any slot it had. Then sets
  // the slots up (`slots:`: plans them and writes their working copies).
  // Called once before serving.
  absl::Status Recover();
  // At shutdown: stops every slot's daemon, restores config.json and the host.
  void Shutdown();

  absl::StatusOr<crest::v1::NodeInfo> GetNodeInfo();
  absl::StatusOr<crest::v1::HostTuningReply> ApplyHostTuning(
      const crest::v1::ApplyHostTuningRequest& request);
  absl::StatusOr<crest::v1::HostTuningReply> RestoreHostTuning();

  // Validates a start request (nothing changes): overrides, pinning, timeout.
  absl::StatusOr<StartParams> PrepareStart(const crest::v1::StartDaemonRequest& request);
  absl::Status StartDaemon(const StartParams& params, const DaemonSupervisor::EventSink& sink,
                           const std::atomic<bool>* cancel);
  absl::StatusOr<crest::v1::StopDaemonReply> StopDaemon(
      const crest::v1::StopDaemonRequest& request);
  // INVALID_ARGUMENT naming the slots there are when `slot` is not one.
  absl::Status CheckSlot(uint32_t slot) const { return FindSlot(slot).status(); }
  crest::v1::DaemonStatus GetDaemonStatus(uint32_t slot = 0) const;
  size_t slot_count() const { return slots_.size(); }

  // Validates a benchmark request against the running daemon.
  absl::StatusOr<loadgen::RunOptions> PrepareBenchmark(
      const crest::v1::RunBenchmarkRequest& request);
  // One benchmark at a time per slot; FAILED_PRECONDITION while another runs.
  absl::StatusOr<crest::v1::BenchmarkResult> RunBenchmark(uint32_t slot,
                                                          const loadgen::RunOptions& options,
                                                          const loadgen::ProgressCallback& progress,
                                                          const std::atomic<bool>* cancel);

  AgentMetrics& metrics() { return metrics_; }
  const AgentConfig& config() const { return config_; }
  const std::string& node_name() const { return options_.node_name; }
  // Set by the registrar to hear about daemon state changes (heartbeats).
  void SetDaemonListener(DaemonSupervisor::StateListener listener);

 private:
  struct Slot {
    SlotRuntime runtime;
    std::unique_ptr<DaemonSupervisor> supervisor;
    std::atomic<bool> benchmark_running{false};
  };

  // The slot `index`; INVALID_ARGUMENT naming the slots there are.
  absl::StatusOr<Slot*> FindSlot(uint32_t index) const;
  void AddSlot(SlotRuntime runtime);
  absl::Status SetUpSlots();
  // The chips `npu-smi info` lists (npu_smi.h); none with `note` set when
  // npu-smi is absent or fails, an error naming the line when its table
  // cannot be read.
  absl::StatusOr<NpuSmiInfo> ListNpus(std::string* note) const;
  // Each device's NUMA node (device id -> node), from `npu-smi info -t
  // topo`'s CPU affinity; devices it cannot place are left out.
  std::map<uint32_t, uint32_t> NpuNumaNodes(const Topology& topology, const NpuSmiInfo& npus) const;
  // CPUs no slot's daemon is pinned to (the benchmark clients'):
  // LoadGeneratorCpus over every slot's daemon.
  std::vector<uint32_t> ClientCpus(const Topology& topology) const;

  const NodeAgentOptions options_;
  const AgentConfig config_;
  const Clock* clock_;
  HostTuner tuner_;
  AgentMetrics metrics_;
  BenchmarkRunner benchmark_;
  absl::Mutex listener_mu_;
  DaemonSupervisor::StateListener extra_listener_ ABSL_GUARDED_BY(listener_mu_);
  SlotPlan plan_;  // how the slots' NPUs and CPUs were divided
  // Set up before serving (constructor or Recover), then only read.
  std::vector<std::unique_ptr<Slot>> slots_;  // last: stopped first
};

}  // namespace crest::agent
