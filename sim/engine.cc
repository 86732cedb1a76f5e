#include "sim/engine.h"

#include <algorithm>
#include <chrono>

namespace crest::sim {

Engine::Engine(const EngineOptions& options, Sink sink, SimMetrics* metrics)
    : options_(options),
      sink_(std::move(sink)),
      metrics_(metrics),
      scheduler_(options.scheduler, options.timing),
      noise_(options.noise_cv, options.seed) {
  if (metrics_ != nullptr)
    metrics_->kv_total.Set(static_cast<double>(options.scheduler.num_blocks));
}

Engine::~Engine() { Stop(); }

void Engine::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Engine::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

absl::Status Engine::Submit(const SequenceSpec& spec) {
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = scheduler_.Add(spec);
  }
  cv_.notify_all();
  return status;
}

void Engine::Cancel(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  scheduler_.Cancel(id);
}

void Engine::Loop() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(mu_);
  Clock::time_point deadline = Clock::now();
  while (!stop_) {
    if (!scheduler_.HasWork()) {
      cv_.wait(lock, [this] { return stop_ || scheduler_.HasWork(); });
      deadline = Clock::now();
      continue;
    }
    StepResult step = scheduler_.Step();
    const double natural_ms = options_.seconds_per_token
                                  ? 1000 * *options_.seconds_per_token *
                                        static_cast<double>(std::max<size_t>(1, step.tokens.size()))
                                  : step.duration_ms;
    double ms = natural_ms * noise_.Factor(virtual_seconds_);
    virtual_seconds_ += ms / 1000.0;
    // Deadlines advance from the previous one, not from "now", so the sink's
    // own cost does not slow the simulated NPU; after a long stall (more
    // than a second behind) the schedule restarts instead of bursting.
    deadline += std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double, std::milli>(ms / options_.time_scale));
    Clock::time_point now = Clock::now();
    if (deadline < now - std::chrono::seconds(1)) deadline = now;
    if (metrics_ != nullptr) {
      metrics_->running.Set(scheduler_.running());
      metrics_->waiting.Set(scheduler_.waiting());
      metrics_->kv_used.Set(static_cast<double>(scheduler_.used_blocks()));
      metrics_->cache_usage.Set(
          static_cast<double>(scheduler_.used_blocks()) /
          static_cast<double>(std::max<int64_t>(1, options_.scheduler.num_blocks)));
      metrics_->generated.Increment(static_cast<double>(step.tokens.size()));
      auto preempted = static_cast<double>(step.preempted.size());
      if (options_.preemptions_per_token) {
        preempted = *options_.preemptions_per_token * static_cast<double>(step.tokens.size());
        if (preempted > 0 && !preempted_once_) {
          preempted += 1;
          preempted_once_ = true;
        }
      }
      metrics_->preemptions.Increment(preempted);
      metrics_->simulated_seconds.Increment(ms / 1000.0);
    }
    if (cv_.wait_until(lock, deadline, [this] { return stop_; })) break;
    lock.unlock();
    if (!step.tokens.empty()) sink_(std::move(step.tokens));
    lock.lock();
  }
}

}  // namespace crest::sim
