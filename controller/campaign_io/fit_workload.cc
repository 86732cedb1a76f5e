#include "controller/campaign_io/fit_workload.h"

#include "common/status.h"
#include "crest/v1/benchmark.pb.h"
#include "loadgen/dataset.h"

namespace crest::controller {

absl::StatusOr<std::vector<std::string>> BenchmarkPrompts(const std::string& dataset,
                                                          int request_count) {
  std::string path = dataset;
  if (path.empty()) {
    CREST_ASSIGN_OR_RETURN(std::string dir, loadgen::DefaultDatasetDir());
    path = dir;
  }
  CREST_ASSIGN_OR_RETURN(std::string file, loadgen::ResolveDatasetPath(path));
  crest::v1::DatasetSpec spec;
  spec.set_type(crest::v1::DATASET_TYPE_GSM8K);
  CREST_ASSIGN_OR_RETURN(std::vector<std::string> prompts, loadgen::LoadPrompts(spec, file, 0));
  if (request_count <= 0) return prompts;
  std::vector<std::string> sent;
  sent.reserve(static_cast<size_t>(request_count));
  for (size_t i = 0; i < static_cast<size_t>(request_count); ++i) {
    sent.push_back(prompts[i % prompts.size()]);
  }
  return sent;
}

absl::StatusOr<sim::FitWorkload> FitWorkloadOf(const sim::Profile& profile,
                                               const WorkloadShape& shape) {
  CREST_ASSIGN_OR_RETURN(std::vector<std::string> prompts,
                         BenchmarkPrompts(shape.dataset, shape.request_count));
  sim::FitWorkload w;
  CREST_ASSIGN_OR_RETURN(w.requests,
                         sim::RequestsFor(profile, shape.workload, prompts, shape.max_output));
  w.world_size = shape.world_size;
  w.cache_block_size = shape.cache_block_size;
  w.max_prefill_tokens = shape.max_prefill_tokens;
  w.npu_mem_gib = shape.npu_mem;
  return w;
}

}  // namespace crest::controller
