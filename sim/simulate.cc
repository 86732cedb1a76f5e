#include "sim/simulate.h"

#include <cmath>

namespace crest::sim {

NoiseProcess::NoiseProcess(double cv, uint64_t seed, double epoch_seconds)
    : sigma_(std::sqrt(std::log1p(cv * cv))), epoch_seconds_(epoch_seconds), rng_(seed) {
  z_ = normal_(rng_);
}

double NoiseProcess::Factor(double virtual_seconds) {
  if (sigma_ == 0) return 1.0;
  constexpr double kRho = 0.9;
  auto epoch = static_cast<int64_t>(virtual_seconds / epoch_seconds_);
  while (epoch_ < epoch) {
    z_ = kRho * z_ + std::sqrt(1 - kRho * kRho) * normal_(rng_);
    ++epoch_;
  }
  return std::exp(sigma_ * z_ - sigma_ * sigma_ / 2);
}

WorkloadResult SimulateWorkload(const SchedulerConfig& config, const StepTimeModel& timing,
                                const std::vector<WorkloadRequest>& requests, int concurrency,
                                double noise_cv, uint64_t seed) {
  Scheduler scheduler(config, timing);
  NoiseProcess noise(noise_cv, seed);
  WorkloadResult result;
  size_t next = 0;
  auto send = [&] {
    const WorkloadRequest& r = requests[next];
    result.prompt_tokens += r.prompt_tokens;
    // Requests that can never fit are skipped, as the server rejects them.
    (void)scheduler.Add({next, r.prompt_tokens, r.output_tokens});
    ++next;
  };
  while (next < requests.size() && static_cast<int>(next) < concurrency) send();
  double now_ms = 0;
  double running_ms = 0;
  while (scheduler.HasWork()) {
    StepResult step = scheduler.Step();
    if (step.kind == StepKind::kNone) break;
    double ms = step.duration_ms * noise.Factor(now_ms / 1000.0);
    now_ms += ms;
    if (step.kind == StepKind::kDecode) running_ms += ms * step.batch_size;
    for (const TokenEvent& t : step.tokens) {
      if (t.finished && next < requests.size()) send();
    }
  }
  result.stats = scheduler.stats();
  result.generated_tokens = result.stats.generated_tokens;
  result.elapsed_seconds = now_ms / 1000.0;
  if (now_ms > 0) {
    result.generate_speed = static_cast<double>(result.generated_tokens) / result.elapsed_seconds;
    result.mean_running = running_ms / now_ms;
  }
  result.generate_speed_per_client = result.generate_speed / std::max(1, concurrency);
  return result;
}

}  // namespace crest::sim
