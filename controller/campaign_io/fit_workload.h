// The workload a profile fit or prediction plays (sim/profile_fit.h): the
// benchmark's requests as a campaign sent them and the daemon's layout,
// from the CLI's flags or a campaign's spec alike.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "sim/profile.h"
#include "sim/profile_fit.h"

namespace crest::controller {

struct WorkloadShape {
  int max_output = 512;  // MaxOutputLen
  double npu_mem = 0;    // npuMemSize, GiB per card; 0: not known
  int world_size = 1;
  int cache_block_size = 128;
  int max_prefill_tokens = 8192;
  std::string dataset;    // GSM8K-style JSONL file or directory; empty: the shipped GSM8K
  int request_count = 0;  // requests measured; 0: the dataset once
  std::string workload;   // the profile's output-length distribution; empty: its default
};

// The prompts of `dataset` (empty: the shipped GSM8K) as the benchmark sends
// them with seed 0: in order, `request_count` of them, round again (0: each
// once).
absl::StatusOr<std::vector<std::string>> BenchmarkPrompts(const std::string& dataset,
                                                          int request_count);

// `shape` as `profile` plays it.
absl::StatusOr<sim::FitWorkload> FitWorkloadOf(const sim::Profile& profile,
                                               const WorkloadShape& shape);

}  // namespace crest::controller
