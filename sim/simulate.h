// Run-to-run noise and the virtual-time benchmark: SimulateWorkload plays a
// closed-loop client (MindIE benchmark's --Concurrency mode) against the
// scheduler without any real time passing, for tests and calibration.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "sim/scheduler.h"

namespace crest::sim {

// A slowly drifting speed factor: step times are multiplied by Factor(t).
// log-factor is an AR(1) process over epochs of `epoch_seconds` of simulated
// time with correlation 0.9 and a stationary CV of `cv`, so a trial of a few
// minutes varies by about `cv` from run to run, as on real hardware.
class NoiseProcess {
 public:
  NoiseProcess(double cv, uint64_t seed, double epoch_seconds = 10.0);
  double Factor(double virtual_seconds);

 private:
  double sigma_;
  double epoch_seconds_;
  std::mt19937_64 rng_;
  std::normal_distribution<double> normal_;
  int64_t epoch_ = 0;
  double z_ = 0;
};

struct WorkloadRequest {
  int prompt_tokens = 1;
  int output_tokens = 1;  // already capped
};

struct WorkloadResult {
  double elapsed_seconds = 0;
  int64_t generated_tokens = 0;
  int64_t prompt_tokens = 0;
  double generate_speed = 0;             // generated tokens / elapsed (token/s)
  double generate_speed_per_client = 0;  // generate_speed / concurrency
  SchedulerStats stats;
  double mean_running = 0;  // time-weighted decode batch size
  // Per request: from its sending to its first token (mean over requests);
  // between two of its later tokens (pooled over every such gap).
  double mean_first_token_ms = 0;
  double mean_decode_ms = 0;
  // What the steps did (StepCounts), for the whole run and for the two means
  // above. The schedule does not depend on the step times, so
  // StepTimeModel::Ms of these is the run's time and the two means, without
  // noise, for any coefficients.
  StepCounts counts;
  StepCounts first_token_counts;
  StepCounts decode_counts;
};

// Sends `requests` in order, keeping `concurrency` of them in flight (a new
// one the moment one finishes) until all are done.
WorkloadResult SimulateWorkload(const SchedulerConfig& config, const StepTimeModel& timing,
                                const std::vector<WorkloadRequest>& requests, int concurrency,
                                double noise_cv, uint64_t seed);

}  // namespace crest::sim
