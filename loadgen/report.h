// crest-bench's outputs: the MindIE-like human tables, the --json document
// (the contract other tools read) and the --csv per-request records.
#pragma once

#include <string>

#include "crest/v1/benchmark.pb.h"
#include "loadgen/run_types.h"

namespace crest::loadgen {

// What the report says about the run besides its figures.
struct ReportContext {
  const RunOptions* options = nullptr;
  std::string engine = "crest-bench";  // or "mindie-benchmark" (adapter)
};

// The two tables, in the rows and words of MindIE's tool.
std::string FormatTable(const crest::v1::BenchmarkResult& result, const ReportContext& context);

// The --json document: top-level GenerateSpeed, GenerateSpeedPerClient,
// FirstTokenTime and DecodeTime {average,p50,p90,p99,max} (ms), QPS,
// succeeded, failed, failures, parameters, and every other metric.
std::string FormatJson(const crest::v1::BenchmarkResult& result, const ReportContext& context);

// The --csv file: a header and one line per request.
std::string FormatCsv(const std::vector<RequestRecord>& requests);

// One progress line (no newline): requests done, tokens/s so far, ETA.
std::string FormatProgress(const crest::v1::BenchmarkProgress& progress);

}  // namespace crest::loadgen
