// The crest-bench load generator as a library: drives an inference server the
// way MindIE's `benchmark` client test does and measures what tuning optimises.
// Used in-process by crest-agent for local runs and by the crest-bench binary.
#pragma once

#include <atomic>

#include "absl/status/statusor.h"

#include "loadgen/run_types.h"

namespace crest::loadgen {

// Runs the benchmark to completion. Returns CANCELLED (and stops promptly,
// aborting requests in flight) once *cancel becomes true; INVALID_ARGUMENT for a
// bad spec; failed requests are counted in the result, never an error.
absl::StatusOr<RunOutput> RunBenchmark(const RunOptions& options,
                                       const ProgressCallback& on_progress,
                                       const std::atomic<bool>* cancel);

}  // namespace crest::loadgen
