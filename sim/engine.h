// Drives the Scheduler in real time on a dedicated thread: each iteration
// sleeps (simulated step time x noise) / time_scale on the monotonic clock,
// then hands the iteration's tokens to the sink. Thread-safe Submit/Cancel.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/status.h"

#include "sim/metrics.h"
#include "sim/scheduler.h"
#include "sim/simulate.h"

namespace crest::sim {

struct EngineOptions {
  SchedulerConfig scheduler;
  StepTimeModel timing;
  double time_scale = 1.0;  // K: a K-times faster NPU
  double noise_cv = 0;
  uint64_t seed = 1;
  // mindie-sim --curve (curve_replay.h): a step takes this many seconds per
  // token it generates, instead of the profile's step time, and the
  // preemption counter advances per generated token (by one at once, so a
  // short run past the knee shows it) instead of by the scheduler's own.
  std::optional<double> seconds_per_token;
  std::optional<double> preemptions_per_token;
};

class Engine {
 public:
  // `sink` runs on the engine thread after each iteration's simulated time
  // has passed; it must not block (post to an io thread).
  using Sink = std::function<void(std::vector<TokenEvent>)>;

  Engine(const EngineOptions& options, Sink sink, SimMetrics* metrics);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void Start();
  void Stop();  // drops unfinished work; idempotent

  absl::Status Submit(const SequenceSpec& spec);
  void Cancel(uint64_t id);

 private:
  void Loop();

  const EngineOptions options_;
  Sink sink_;
  SimMetrics* metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;            // guarded by mu_
  Scheduler scheduler_;          // guarded by mu_
  NoiseProcess noise_;           // engine thread only
  double virtual_seconds_ = 0;   // engine thread only
  bool preempted_once_ = false;  // engine thread only (--curve's counter)
  std::thread thread_;
};

}  // namespace crest::sim
