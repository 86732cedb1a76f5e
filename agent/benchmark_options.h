// Turns a BenchmarkSpec from the wire into crest-bench's RunOptions for the
// local daemon: target URLs from the ServerConfig of the config.json the
// daemon was started with (the supervisor's view of it; http or https),
// the dataset by type and name from the agent's own data directory (never a
// path from the wire), the model name from config.json when unset, and the
// load generator's CPUs off the daemon's.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "agent/agent_config.h"
#include "agent/config_json_editor.h"
#include "common/topology.h"
#include "crest/v1/benchmark.pb.h"
#include "loadgen/runner.h"

namespace crest::agent {

// <datasets_dir>/<name or default>/test.jsonl (or <name>.jsonl); the default
// name for GSM8K is "gsm8k". SYNTHETIC needs no file (empty path).
absl::StatusOr<std::string> ResolveDataset(const crest::v1::DatasetSpec& dataset,
                                           const std::string& datasets_dir);

// CPUs for the load generator: the online CPUs the daemon does not use (the
// even NUMA nodes when the daemon has the odd ones); empty (no affinity) when
// the daemon is not pinned or uses every CPU.
std::vector<uint32_t> LoadGeneratorCpus(const Topology& topology,
                                        const std::vector<uint32_t>& daemon_cpus);

absl::StatusOr<loadgen::RunOptions> MakeRunOptions(const crest::v1::BenchmarkSpec& spec,
                                                   const MindieConfigView& daemon,
                                                   const std::string& datasets_dir,
                                                   std::vector<uint32_t> cpus,
                                                   const std::string& ca_file);

// The benchmark client `tool` names: crest-bench's own runner (in process,
// with progress and cancellation), or MindIE's `benchmark` / AISBench run as
// a child (no progress; a cancelled run ends when the tool does).
std::function<absl::StatusOr<loadgen::RunOutput>(
    const loadgen::RunOptions&, const loadgen::ProgressCallback&, const std::atomic<bool>*)>
BenchmarkClientFor(const BenchmarkTool& tool);

}  // namespace crest::agent
