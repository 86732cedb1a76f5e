// A hand-written fake agent behind the AgentClient seam, for unit tests of
// scheduling, retries and resume: canned npuBlockNum and throughput curve,
// OOM above a limit, a switch that makes it unreachable, and a way to hold a
// benchmark until the test releases it (to kill the node "mid-trial").
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"

#include "controller/agent_client.h"

namespace crest::controller::testing {

class FakeAgent final : public AgentClient {
 public:
  explicit FakeAgent(std::string name) : name_(std::move(name)) {}

  // --- knobs ---
  void SetBlockNum(int64_t blocks);
  // Daemons start ready but without npuBlockNum, for `reason` (an agent
  // whose daemon logged only its warm-up cache).
  void SetBlockNumUnknown(std::string reason);
  // GenerateSpeed as a function of maxBatchSize.
  void SetCurve(std::function<double(int64_t)> curve);
  // Average FirstTokenTime and DecodeTime of every benchmark (ms).
  void SetLatencies(double first_token_ms, double decode_ms);
  // GenerateSpeed is multiplied by this while supportSelectBatch is on.
  void SetSelectBatchFactor(double factor);
  // Output tokens per request: QPS = GenerateSpeed / this, and a rate-mode
  // run gives min(curve, rate x this).
  void SetTokensPerRequest(double tokens);
  // Daemon starts with maxBatchSize above this fail with OUT_OF_MEMORY.
  void SetOomAbove(int64_t max_batch_size);
  void SetUnreachable(bool unreachable);
  // Benchmarks report that the daemon died during the run (daemon_gone).
  void SetDaemonDiesDuringBenchmarks(bool dies);
  // While held, benchmarks block until ReleaseBenchmarks() (which lets the
  // ones blocked now finish), cancellation or unreachability.
  void HoldBenchmarks(bool hold);
  void ReleaseBenchmarks();
  // Lets one of the benchmarks blocked now (or the next to block) finish.
  void ReleaseOneBenchmark();

  // --- observations ---
  int benchmarks_started() const;
  int benchmarks_held() const;  // blocked right now
  // Waits until `n` benchmarks are blocked; false after `timeout`.
  bool AwaitHeld(int n, absl::Duration timeout) const;
  // Waits until benchmark number `n` (1-based) has started and is blocked.
  bool AwaitNthHeld(int n, absl::Duration timeout) const;
  // Waits until the host tuning was restored `n` times and no daemon runs.
  bool AwaitPutBack(int n, absl::Duration timeout) const;
  int tunings_applied() const;
  int tunings_restored() const;
  int daemons_running() const;
  // The most daemons that ran at once (one per slot).
  int peak_daemons() const;
  // For each daemon start, the maxBatchSize of the daemons running then in
  // the other slots.
  std::vector<std::vector<int64_t>> running_at_starts() const;
  std::vector<crest::v1::StartDaemonRequest> starts() const;
  std::vector<crest::v1::BenchmarkSpec> benchmarks() const;

  // --- AgentClient ---
  absl::StatusOr<crest::v1::NodeInfo> GetNodeInfo(absl::Duration timeout) override;
  absl::StatusOr<crest::v1::HostTuningReply> ApplyHostTuning(
      const crest::v1::ApplyHostTuningRequest& request, absl::Duration timeout) override;
  absl::StatusOr<crest::v1::HostTuningReply> RestoreHostTuning(absl::Duration timeout) override;
  absl::StatusOr<DaemonOutcome> StartDaemon(const crest::v1::StartDaemonRequest& request,
                                            absl::Duration timeout, CancelSignal* cancel) override;
  absl::Status StopDaemon(uint32_t slot, absl::Duration timeout) override;
  absl::StatusOr<crest::v1::BenchmarkResult> RunBenchmark(
      uint32_t slot, const crest::v1::BenchmarkSpec& spec, absl::Duration timeout,
      const std::function<void(const crest::v1::BenchmarkProgress&)>& on_progress,
      CancelSignal* cancel) override;

 private:
  absl::Status Unreachable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::string name_;
  mutable absl::Mutex mu_;
  int64_t blocks_ ABSL_GUARDED_BY(mu_) = 2176;
  std::string block_num_unknown_ ABSL_GUARDED_BY(mu_);
  std::function<double(int64_t)> curve_ ABSL_GUARDED_BY(mu_) = [](int64_t b) {
    return static_cast<double>(b);
  };
  double first_token_ms_ ABSL_GUARDED_BY(mu_) = 120.4;
  double decode_ms_ ABSL_GUARDED_BY(mu_) = 45.6;
  int64_t oom_above_ ABSL_GUARDED_BY(mu_) = 1 << 30;
  bool unreachable_ ABSL_GUARDED_BY(mu_) = false;
  bool daemon_dies_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  int release_generation_ ABSL_GUARDED_BY(mu_) = 0;
  int single_releases_ ABSL_GUARDED_BY(mu_) = 0;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  int benchmarks_started_ ABSL_GUARDED_BY(mu_) = 0;
  int tunings_applied_ ABSL_GUARDED_BY(mu_) = 0;
  int tunings_restored_ ABSL_GUARDED_BY(mu_) = 0;
  // The daemon running in each slot.
  struct Daemon {
    int64_t batch = 0;
    bool select_batch = false;
    int32_t pid = 0;
  };
  std::map<uint32_t, Daemon> daemons_ ABSL_GUARDED_BY(mu_);
  int peak_daemons_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::vector<int64_t>> running_at_starts_ ABSL_GUARDED_BY(mu_);
  double select_batch_factor_ ABSL_GUARDED_BY(mu_) = 1;
  double tokens_per_request_ ABSL_GUARDED_BY(mu_) = 100;
  int32_t pid_ ABSL_GUARDED_BY(mu_) = 1000;
  std::vector<crest::v1::StartDaemonRequest> starts_ ABSL_GUARDED_BY(mu_);
  std::vector<crest::v1::BenchmarkSpec> benchmarks_ ABSL_GUARDED_BY(mu_);
};

class FakeConnector final : public AgentConnector {
 public:
  std::shared_ptr<FakeAgent> Add(const std::string& name);
  std::shared_ptr<FakeAgent> agent(const std::string& name);
  std::shared_ptr<AgentClient> Connect(const std::string& node,
                                       const std::string& address) override;

 private:
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<FakeAgent>> agents_ ABSL_GUARDED_BY(mu_);
};

}  // namespace crest::controller::testing
