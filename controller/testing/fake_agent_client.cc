#include "controller/testing/fake_agent_client.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace crest::controller::testing {

void FakeAgent::SetBlockNum(int64_t blocks) {
  absl::MutexLock lock(&mu_);
  blocks_ = blocks;
}
void FakeAgent::SetBlockNumUnknown(std::string reason) {
  absl::MutexLock lock(&mu_);
  block_num_unknown_ = std::move(reason);
}
void FakeAgent::SetCurve(std::function<double(int64_t)> curve) {
  absl::MutexLock lock(&mu_);
  curve_ = std::move(curve);
}
void FakeAgent::SetLatencies(double first_token_ms, double decode_ms) {
  absl::MutexLock lock(&mu_);
  first_token_ms_ = first_token_ms;
  decode_ms_ = decode_ms;
}
void FakeAgent::SetSelectBatchFactor(double factor) {
  absl::MutexLock lock(&mu_);
  select_batch_factor_ = factor;
}

void FakeAgent::SetTokensPerRequest(double tokens) {
  absl::MutexLock lock(&mu_);
  tokens_per_request_ = tokens;
}

void FakeAgent::SetOomAbove(int64_t max_batch_size) {
  absl::MutexLock lock(&mu_);
  oom_above_ = max_batch_size;
}
void FakeAgent::SetUnreachable(bool unreachable) {
  absl::MutexLock lock(&mu_);
  unreachable_ = unreachable;
}
void FakeAgent::HoldBenchmarks(bool hold) {
  absl::MutexLock lock(&mu_);
  hold_ = hold;
}
void FakeAgent::ReleaseBenchmarks() {
  absl::MutexLock lock(&mu_);
  ++release_generation_;
}
void FakeAgent::ReleaseOneBenchmark() {
  absl::MutexLock lock(&mu_);
  ++single_releases_;
}
int FakeAgent::benchmarks_started() const {
  absl::MutexLock lock(&mu_);
  return benchmarks_started_;
}
int FakeAgent::benchmarks_held() const {
  absl::MutexLock lock(&mu_);
  return held_;
}
bool FakeAgent::AwaitHeld(int n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto held = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return held_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&held), timeout);
}
bool FakeAgent::AwaitPutBack(int n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto put_back = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return tunings_restored_ >= n && daemons_.empty();
  };
  return mu_.AwaitWithTimeout(absl::Condition(&put_back), timeout);
}
bool FakeAgent::AwaitNthHeld(int n, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto held = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return benchmarks_started_ >= n && held_ >= 1;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&held), timeout);
}
int FakeAgent::tunings_applied() const {
  absl::MutexLock lock(&mu_);
  return tunings_applied_;
}
int FakeAgent::tunings_restored() const {
  absl::MutexLock lock(&mu_);
  return tunings_restored_;
}
int FakeAgent::daemons_running() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(daemons_.size());
}
int FakeAgent::peak_daemons() const {
  absl::MutexLock lock(&mu_);
  return peak_daemons_;
}
std::vector<std::vector<int64_t>> FakeAgent::running_at_starts() const {
  absl::MutexLock lock(&mu_);
  return running_at_starts_;
}
std::vector<crest::v1::StartDaemonRequest> FakeAgent::starts() const {
  absl::MutexLock lock(&mu_);
  return starts_;
}
std::vector<crest::v1::BenchmarkSpec> FakeAgent::benchmarks() const {
  absl::MutexLock lock(&mu_);
  return benchmarks_;
}

absl::Status FakeAgent::Unreachable() const {
  return absl::UnavailableError(absl::StrCat("fake agent ", name_, " is unreachable"));
}

absl::StatusOr<crest::v1::NodeInfo> FakeAgent::GetNodeInfo(absl::Duration) {
  absl::MutexLock lock(&mu_);
  if (unreachable_) return Unreachable();
  crest::v1::NodeInfo info;
  info.set_node_name(name_);
  (*info.mutable_labels())["fake"] = "true";
  return info;
}

absl::StatusOr<crest::v1::HostTuningReply> FakeAgent::ApplyHostTuning(
    const crest::v1::ApplyHostTuningRequest&, absl::Duration) {
  absl::MutexLock lock(&mu_);
  if (unreachable_) return Unreachable();
  ++tunings_applied_;
  return crest::v1::HostTuningReply();
}

absl::StatusOr<crest::v1::HostTuningReply> FakeAgent::RestoreHostTuning(absl::Duration) {
  absl::MutexLock lock(&mu_);
  if (unreachable_) return Unreachable();
  ++tunings_restored_;
  return crest::v1::HostTuningReply();
}

absl::StatusOr<DaemonOutcome> FakeAgent::StartDaemon(const crest::v1::StartDaemonRequest& request,
                                                     absl::Duration, CancelSignal*) {
  absl::MutexLock lock(&mu_);
  if (unreachable_) return Unreachable();
  starts_.push_back(request);
  int64_t batch = 200;  // the config.json default
  bool select_batch = false;
  for (const auto& o : request.overrides()) {
    if (o.key() == "maxBatchSize") batch = o.int_value();
    if (o.key() == "supportSelectBatch") select_batch = o.bool_value();
  }
  DaemonOutcome out;
  if (batch > oom_above_) {
    out.failed_event.set_kind(crest::v1::DAEMON_FAILURE_OUT_OF_MEMORY);
    out.failed_event.set_reason("out of memory allocating the KV cache");
    return out;
  }
  std::vector<int64_t>& running = running_at_starts_.emplace_back();
  for (const auto& [slot, daemon] : daemons_) {
    if (slot != request.slot()) running.push_back(daemon.batch);
  }
  daemons_[request.slot()] = {batch, select_batch, ++pid_};
  peak_daemons_ = std::max(peak_daemons_, static_cast<int>(daemons_.size()));
  out.ready = true;
  out.ready_event.set_npu_block_num(block_num_unknown_.empty() ? blocks_ : 0);
  out.ready_event.set_npu_block_num_unknown(block_num_unknown_);
  return out;
}

absl::Status FakeAgent::StopDaemon(uint32_t slot, absl::Duration) {
  absl::MutexLock lock(&mu_);
  if (unreachable_) return Unreachable();
  daemons_.erase(slot);
  return absl::OkStatus();
}

absl::StatusOr<crest::v1::BenchmarkResult> FakeAgent::RunBenchmark(
    uint32_t slot, const crest::v1::BenchmarkSpec& spec, absl::Duration,
    const std::function<void(const crest::v1::BenchmarkProgress&)>& on_progress,
    CancelSignal* cancel) {
  bool cancelled = false;
  ScopedCancelCallback cb(cancel, [&] {
    absl::MutexLock lock(&mu_);
    cancelled = true;
  });
  absl::MutexLock lock(&mu_);
  if (unreachable_) return Unreachable();
  ++benchmarks_started_;
  benchmarks_.push_back(spec);
  int generation = release_generation_;
  if (hold_) {
    ++held_;
    auto released = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return cancelled || unreachable_ || release_generation_ != generation || single_releases_ > 0;
    };
    mu_.Await(absl::Condition(&released));
    if (!cancelled && !unreachable_ && release_generation_ == generation) --single_releases_;
    --held_;
  }
  if (cancelled) return absl::CancelledError("benchmark cancelled");
  if (unreachable_) return Unreachable();
  crest::v1::BenchmarkProgress progress;
  progress.set_requests_done(spec.request_count());
  progress.set_requests_total(spec.request_count());
  if (on_progress) {
    mu_.Unlock();
    on_progress(progress);
    mu_.Lock();
  }
  crest::v1::BenchmarkResult r;
  const Daemon daemon = daemons_.count(slot) != 0 ? daemons_.at(slot) : Daemon{};
  double speed = curve_(daemon.batch) * (daemon.select_batch ? select_batch_factor_ : 1);
  if (spec.request_rate() > 0) speed = std::min(speed, spec.request_rate() * tokens_per_request_);
  r.set_generate_speed(speed);
  r.set_qps(speed / tokens_per_request_);
  r.set_daemon_pid(daemon.pid);
  r.set_concurrency(spec.concurrency());
  r.set_generate_speed_per_client(spec.concurrency() > 0 ? speed / spec.concurrency() : 0);
  r.mutable_first_token_time()->set_average_ms(first_token_ms_);
  r.mutable_decode_time()->set_average_ms(decode_ms_);
  r.set_succeeded(spec.request_count() > 0 ? spec.request_count() : 10);
  if (daemon_dies_) {
    r.set_daemon_gone(absl::StrCat("the daemon (pid ", daemon.pid, ") exited (code 134)"));
    daemons_.erase(slot);
  }
  return r;
}

void FakeAgent::SetDaemonDiesDuringBenchmarks(bool dies) {
  absl::MutexLock lock(&mu_);
  daemon_dies_ = dies;
}

std::shared_ptr<FakeAgent> FakeConnector::Add(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto agent = std::make_shared<FakeAgent>(name);
  agents_[name] = agent;
  return agent;
}

std::shared_ptr<FakeAgent> FakeConnector::agent(const std::string& name) {
  absl::MutexLock lock(&mu_);
  return agents_[name];
}

std::shared_ptr<AgentClient> FakeConnector::Connect(const std::string& node, const std::string&) {
  absl::MutexLock lock(&mu_);
  auto it = agents_.find(node);
  if (it != agents_.end()) return it->second;
  auto missing = std::make_shared<FakeAgent>(node);
  missing->SetUnreachable(true);
  return missing;
}

}  // namespace crest::controller::testing
