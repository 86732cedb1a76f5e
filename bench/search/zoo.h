// search-bench on curve files (--curve, and the zoo of bench/search/curves/):
// every strategy over the seeds on 1, 2 and 4 nodes, the zoo's table with
// the per-curve targets of docs/search.md, and the --json file (a contract).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "bench/search/play.h"

namespace crest::bench {

// The cases of curve files; a directory stands for its *.json files, by name.
absl::StatusOr<std::vector<Case>> LoadCurveCases(const std::vector<std::string>& paths);

// Node counts every curve is played on.
inline constexpr std::array<size_t, 3> kCurveNodes = {1, 2, 4};

struct CurveResult {
  std::string name;
  int64_t peak_at = 0;
  double peak = 0;
  // [strategy][node count index][seed]
  std::vector<std::array<std::vector<Play>, kCurveNodes.size()>> plays;
  // [strategy][node count index][seed]: the found point's true share of the peak.
  std::vector<std::array<std::vector<double>, kCurveNodes.size()>> shares;
};

// Every strategy on every case over seeds first_seed .. first_seed + seeds - 1,
// `threads` cases at once.
std::vector<CurveResult> PlayCurves(const std::vector<Case>& cases,
                                    const std::vector<Strategy>& strategies, int first_seed,
                                    int seeds, int threads);

// The zoo's table: one row per curve, the default strategy (the first) with
// its targets, against the practice and the grid.
struct ZooTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> after;  // the targets, met or not
  bool all_met = true;
};
ZooTable ZooTableOf(const std::vector<CurveResult>& results,
                    const std::vector<Strategy>& strategies);

// --json: {"curves": [{"name", "peak": {"maxBatchSize", "GenerateSpeed"},
// "strategies": {key: {"nodes": {"1"|"2"|"4": {"found", "runs", "rounds",
// "basis"}}}}}]}.
std::string CurvesJson(const std::vector<CurveResult>& results,
                       const std::vector<Strategy>& strategies);

}  // namespace crest::bench
