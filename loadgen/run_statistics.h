// The run's statistics (not Prometheus metrics): turns per-request records
// into the run's figures with MindIE's names and meaning (see
// docs/crest-bench.md for every definition).
#pragma once

#include <cstdint>
#include <vector>

#include "crest/v1/benchmark.pb.h"
#include "loadgen/run_types.h"

namespace crest::loadgen {

// Linear-interpolated percentile (numpy's default, as MindIE's tool uses) of
// ascending `sorted`; q in [0, 100]. 0 for an empty input.
double Percentile(const std::vector<double>& sorted, double q);

// Statistics of `samples` (any order; sorted in place).
crest::v1::LatencyStats MakeStats(std::vector<double> samples);

// Computes the result from every measured request (failed ones included:
// they count in `failed`/`failures` and in the run's duration; latencies and
// token sums come from succeeded requests, as MindIE reports them).
crest::v1::BenchmarkResult ComputeResult(const std::vector<RequestRecord>& records,
                                         uint32_t concurrency);

}  // namespace crest::loadgen
