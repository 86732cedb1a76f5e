// Adapter for the real MindIE `benchmark` tool: builds its command line from
// the same RunOptions, runs it (behind ProcessRunner, so tests feed recorded
// output), and parses its two printed tables into a BenchmarkResult.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "crest/v1/benchmark.pb.h"
#include "loadgen/run_types.h"

namespace crest::loadgen {

struct ProcessResult {
  int exit_code = 0;   // 128 + signal when killed by a signal
  std::string output;  // stdout and stderr, interleaved
};

// The process-spawning seam.
class ProcessRunner {
 public:
  virtual ~ProcessRunner() = default;
  // Runs argv[0] with argv, adding `env` ("K=V") to this process's environment.
  virtual absl::StatusOr<ProcessResult> Run(const std::vector<std::string>& argv,
                                            const std::vector<std::string>& env) = 0;
};

// fork + execvp; waits for the child and collects its output.
class SubprocessRunner final : public ProcessRunner {
 public:
  absl::StatusOr<ProcessResult> Run(const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env) override;
};

struct MindieToolOptions {
  std::string binary = "benchmark";
  std::string save_path = "./instance";
  std::string model_path;  // the tool loads its tokenizer from here
};

// The tool's argv for `options` (INVALID_ARGUMENT for what it cannot do,
// e.g. a duration limit or synthetic prompts).
absl::StatusOr<std::vector<std::string>> BuildMindieBenchmarkArgs(const RunOptions& options,
                                                                  const MindieToolOptions& tool);

// The environment the tool needs to print its tables on stdout.
std::vector<std::string> MindieBenchmarkEnv();

// Parses the tool's printed output: "The BenchMark test performance metric
// result is:" and "... common metric result is:" tables (older builds print a
// single GenerateSpeed row instead of Output/Input/TotalGenerateSpeed).
absl::StatusOr<crest::v1::BenchmarkResult> ParseMindieBenchmarkOutput(std::string_view output);

// Builds the command line, runs it and parses the result. The per-request
// records stay empty (the tool keeps them in its own SavePath files).
absl::StatusOr<RunOutput> RunMindieBenchmark(const RunOptions& options,
                                             const MindieToolOptions& tool, ProcessRunner& runner);

}  // namespace crest::loadgen
