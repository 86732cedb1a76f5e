#include "agent/benchmark_options.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"

#include "agent/request_validation.h"
#include "common/status.h"
#include "loadgen/aisbench_adapter.h"
#include "loadgen/dataset.h"
#include "loadgen/mindie_adapter.h"

namespace crest::agent {

absl::StatusOr<std::string> ResolveDataset(const crest::v1::DatasetSpec& dataset,
                                           const std::string& datasets_dir) {
  if (dataset.type() == crest::v1::DATASET_TYPE_SYNTHETIC) return std::string();
  std::string name = dataset.name();
  if (name.empty()) {
    if (dataset.type() == crest::v1::DATASET_TYPE_JSONL) {
      return absl::InvalidArgumentError("spec.dataset.name: required for JSONL datasets");
    }
    name = "gsm8k";
  }
  if (!IsSafeName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.dataset.name: \"", name, "\" is not a dataset name"));
  }
  std::string dir = absl::StrCat(datasets_dir, "/", name);
  std::string file = absl::StrCat(datasets_dir, "/", name, ".jsonl");
  if (::access(dir.c_str(), R_OK) == 0) {
    auto path = loadgen::ResolveDatasetPath(dir);
    if (path.ok()) return path;
  }
  if (::access(file.c_str(), R_OK) == 0) return file;
  return absl::InvalidArgumentError(absl::StrCat("spec.dataset.name: no dataset \"", name,
                                                 "\" on this node (looked in ", datasets_dir, ")"));
}

std::vector<uint32_t> LoadGeneratorCpus(const Topology& topology,
                                        const std::vector<uint32_t>& daemon_cpus) {
  if (daemon_cpus.empty()) return {};
  return topology.OnlineCpusExcept(daemon_cpus);
}

absl::StatusOr<loadgen::RunOptions> MakeRunOptions(const crest::v1::BenchmarkSpec& spec,
                                                   const MindieConfigView& daemon,
                                                   const std::string& datasets_dir,
                                                   std::vector<uint32_t> cpus,
                                                   const std::string& ca_file) {
  CREST_RETURN_IF_ERROR(ValidateBenchmarkSpec(spec));
  loadgen::RunOptions options;
  options.spec = spec;
  if (options.spec.model_name().empty()) options.spec.set_model_name(daemon.model_name);
  options.target.base_url = daemon.BusinessUrl();
  options.target.management_url = daemon.ManagementUrl();
  if (daemon.https_enabled) {
    options.target.ca_file = ca_file;
    options.target.insecure_skip_verify = ca_file.empty();
  }
  CREST_ASSIGN_OR_RETURN(options.dataset_path, ResolveDataset(spec.dataset(), datasets_dir));
  options.cpus = std::move(cpus);
  return options;
}

std::function<absl::StatusOr<loadgen::RunOutput>(
    const loadgen::RunOptions&, const loadgen::ProgressCallback&, const std::atomic<bool>*)>
BenchmarkClientFor(const BenchmarkTool& tool) {
  if (tool.kind == "aisbench") {
    loadgen::AisBenchOptions options;
    options.binary = tool.binary;
    options.models = tool.models;
    options.datasets = tool.datasets;
    options.work_dir = tool.work_dir;
    return [options](const loadgen::RunOptions& run, const loadgen::ProgressCallback&,
                     const std::atomic<bool>*) {
      loadgen::SubprocessRunner runner;
      return loadgen::RunAisBench(run, options, runner);
    };
  }
  if (tool.kind == "mindie-benchmark") {
    loadgen::MindieToolOptions options;
    options.binary = tool.binary;
    options.save_path = tool.save_path;
    options.model_path = tool.model_path;
    return [options](const loadgen::RunOptions& run, const loadgen::ProgressCallback&,
                     const std::atomic<bool>*) {
      loadgen::SubprocessRunner runner;
      return loadgen::RunMindieBenchmark(run, options, runner);
    };
  }
  return &loadgen::RunBenchmark;
}

}  // namespace crest::agent
