// Adapter for AISBench (`ais_bench`, github.com/AISBench/benchmark), the
// open-source tool that replaces MindIE's `benchmark`: builds its perf-mode
// command line from the same RunOptions (its API-model overrides --host-ip,
// --host-port, --model-name, --batch-size, --max-out-len, --request-rate,
// --num-prompts, --num-warmups: AISBench/benchmark
// ais_bench/benchmark/cli/argument_parser.py at commit 02a6f3d),
// runs it behind ProcessRunner, and reads its results into a
// BenchmarkResult: the result files it names on its last line
// (performances/<model abbr>/<dataset abbr>.csv and .json under its work
// dir), else the two tables it prints. Real samples and the file layout:
// tests/data/real/aisbench/ and FINDINGS-npu-smi-benchmark-aisbench.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "crest/v1/benchmark.pb.h"
#include "loadgen/mindie_adapter.h"  // ProcessRunner
#include "loadgen/run_types.h"

namespace crest::loadgen {

struct AisBenchOptions {
  std::string binary = "ais_bench";
  // AISBench's model and dataset configs (`ais_bench --search` lists them).
  std::string models = "vllm_api_stream_chat";
  std::string datasets = "gsm8k_gen_0_shot_cot_str_perf";
  std::string work_dir = "outputs/crest";
};

// The tool's argv for `options`; INVALID_ARGUMENT for what it cannot do
// (a duration limit, synthetic prompts of crest-bench's own, a target that
// is not http(s)://host:port).
absl::StatusOr<std::vector<std::string>> BuildAisBenchArgs(const RunOptions& options,
                                                           const AisBenchOptions& tool);

// The two tables AISBench prints in perf mode ("Performance Results of task
// ...": the per-request statistics, then the common metrics), as printed.
absl::StatusOr<crest::v1::BenchmarkResult> ParseAisBenchScreen(std::string_view output);

// The result files of one task: `csv` the per-request statistics
// (`Performance Parameters,Stage,Average,...`), `json` the common metrics
// ({"Benchmark Duration": {"total": "98409.4916 ms"}, ...}).
absl::StatusOr<crest::v1::BenchmarkResult> ParseAisBenchResultFiles(std::string_view csv,
                                                                    std::string_view json);

// The directory named by the last "Performance Result files located in
// <dir>." line (older builds: "files locate in"); empty when absent.
std::string AisBenchResultDir(std::string_view output);

// Builds the command line, runs it, and reads the result files (`dataset
// abbr` is the one .csv of the result directory), falling back to the
// printed tables when there are none.
absl::StatusOr<RunOutput> RunAisBench(const RunOptions& options, const AisBenchOptions& tool,
                                      ProcessRunner& runner);

}  // namespace crest::loadgen
