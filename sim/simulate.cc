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
  // Time and step counts: so far, when each request was sent and when its
  // first token came; summed over the waits for first tokens and over the
  // decoding that followed.
  struct Mark {
    double ms = 0;
    StepCounts counts;
    void AddSpan(const Mark& from, const Mark& to) {
      ms += to.ms - from.ms;
      StepCounts span = to.counts;
      span -= from.counts;
      counts += span;
    }
  };
  Mark now, waiting, decoding;
  std::vector<Mark> sent(requests.size()), first(requests.size());
  size_t firsts = 0;
  double decode_gaps = 0;
  size_t next = 0;
  auto send = [&] {
    sent[next] = now;
    const WorkloadRequest& r = requests[next];
    result.prompt_tokens += r.prompt_tokens;
    // Requests that can never fit are skipped, as the server rejects them.
    (void)scheduler.Add({next, r.prompt_tokens, r.output_tokens});
    ++next;
  };
  while (next < requests.size() && static_cast<int>(next) < concurrency) send();
  double running_ms = 0;
  while (scheduler.HasWork()) {
    StepResult step = scheduler.Step();
    if (step.kind == StepKind::kNone) break;
    double ms = step.duration_ms * noise.Factor(now.ms / 1000.0);
    now.ms += ms;
    now.counts += step.counts;
    if (step.kind == StepKind::kDecode) running_ms += ms * step.batch_size;
    for (const TokenEvent& t : step.tokens) {
      if (t.generated == 1) {
        first[t.id] = now;
        waiting.AddSpan(sent[t.id], now);
        ++firsts;
      }
      if (t.finished && t.generated > 1) {
        decoding.AddSpan(first[t.id], now);
        decode_gaps += t.generated - 1;
      }
      if (t.finished && next < requests.size()) send();
    }
  }
  result.counts = now.counts;
  if (firsts > 0) {
    result.mean_first_token_ms = waiting.ms / static_cast<double>(firsts);
    result.first_token_counts = waiting.counts;
    result.first_token_counts *= 1 / static_cast<double>(firsts);
  }
  if (decode_gaps > 0) {
    result.mean_decode_ms = decoding.ms / decode_gaps;
    result.decode_counts = decoding.counts;
    result.decode_counts *= 1 / decode_gaps;
  }
  result.stats = scheduler.stats();
  result.generated_tokens = result.stats.generated_tokens;
  result.elapsed_seconds = now.ms / 1000.0;
  if (now.ms > 0) {
    result.generate_speed = static_cast<double>(result.generated_tokens) / result.elapsed_seconds;
    result.mean_running = running_ms / now.ms;
  }
  result.generate_speed_per_client = result.generate_speed / std::max(1, concurrency);
  return result;
}

}  // namespace crest::sim
