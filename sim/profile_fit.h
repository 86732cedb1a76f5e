// Learning mindie-sim's model from measured runs: FitProfile fits a profile's
// step-time coefficients (FitStepTimes) and its KV capacity (the block count
// the daemon reported) to one model's measured points, and PredictCurve
// plays the noise-free virtual-time benchmark of a profile on a workload
// that nobody measured (another MaxOutputLen, another npuMemSize).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

#include "sim/profile.h"
#include "sim/simulate.h"
#include "sim/timing_fit.h"

namespace crest::sim {

// What the benchmark sent and how the daemon was laid out, for the runs of
// one model (or for a prediction).
struct FitWorkload {
  std::vector<WorkloadRequest> requests;  // RequestsFor
  int world_size = 1;
  int cache_block_size = 128;
  int max_prefill_tokens = 8192;
  double npu_mem_gib = 0;     // npuMemSize; 0: not known
  int64_t npu_block_num = 0;  // the block count the daemon logged; 0: none
};

// The requests of `prompts` as `profile` sees them: its tokenizer
// approximation and its `workload`'s output lengths, capped at `max_output`.
// NOT_FOUND naming the profile's workloads when `workload` is not one of
// them (empty: the profile's default).
absl::StatusOr<std::vector<WorkloadRequest>> RequestsFor(const Profile& profile,
                                                         const std::string& workload,
                                                         const std::vector<std::string>& prompts,
                                                         int max_output);

// One configuration as the benchmark ran it, with the mean figures of its
// trusted runs (zero: the figure was not measured).
struct MeasuredPoint {
  int max_batch_size = 0;
  int max_prefill_batch_size = 0;
  int concurrency = 0;
  bool support_select_batch = false;
  double prefill_time_ms_per_req = 0;
  double decode_time_ms_per_req = 0;
  double generate_speed = 0;  // token/s
  double first_token_ms = 0;  // mean FirstTokenTime
  double decode_ms = 0;       // mean DecodeTime
  std::optional<double> preemptions;
  int runs = 1;
};

// A configuration's noise-free figures under a profile.
struct PointPrediction {
  double generate_speed = 0;
  double first_token_ms = 0;
  double decode_ms = 0;
  int64_t preemptions = 0;
};

struct ProfileFit {
  Profile profile;  // the start's, with the fitted timing (and KV scale)
  TimingFit timing;
  std::vector<PointPrediction> predicted;  // per measured point, under `profile`
  bool kv_fitted = false;                  // kv_block_scale set from npuBlockNum
  std::string kv_basis;                    // where the KV capacity comes from
};

// Fits `start` to `points`, measured under `w`. The schedule of a run does
// not depend on the step times (simulate.h), so one noise-free play of each
// configuration under `start` gives what its steps did, and the fit is
// linear. The KV capacity: the reported npuBlockNum when there is one (and,
// with npuMemSize known, a kv_block_scale that reproduces it), else the
// start's sizing at npuMemSize. FAILED_PRECONDITION when the points cannot
// support a fit (fewer than two, none with a throughput), INVALID_ARGUMENT
// naming the point for an impossible figure or configuration.
absl::StatusOr<ProfileFit> FitProfile(const Profile& start, const FitWorkload& w,
                                      const std::vector<MeasuredPoint>& points);

// KV blocks the engine can use under `w`: the reported count less the one it
// keeps in reserve, else the profile's sizing of npuMemSize.
absl::StatusOr<int64_t> UsableBlocks(const Profile& profile, const FitWorkload& w);

// `point`'s configuration played noise-free under `profile`.
absl::StatusOr<PointPrediction> Predict(const Profile& profile, const FitWorkload& w,
                                        const MeasuredPoint& point);

// The practice's configuration at maxBatchSize b: maxPrefillBatchSize b / 2,
// Concurrency b - 1.
MeasuredPoint PracticePoint(int max_batch_size);

struct PredictedCurve {
  std::vector<std::pair<int, double>> curve;  // maxBatchSize, GenerateSpeed
  int peak_max_batch_size = 0;
  double peak_generate_speed = 0;
  int64_t npu_block_num = 0;  // the sizing it ran with
  int lo = 0, hi = 0;         // the range played
};

// The practice's configuration over maxBatchSize in [lo, hi] (0, 0: from
// 1 to three times the batch whose average requests fill the cache), on a
// grid of `points`, then every maxBatchSize around the grid's best.
absl::StatusOr<PredictedCurve> PredictCurve(const Profile& profile, const FitWorkload& w, int lo,
                                            int hi, int points = 48);

// `profile` as the JSON that ParseProfile reads back (unknown keys aside).
nlohmann::json ProfileJson(const Profile& profile);

}  // namespace crest::sim
