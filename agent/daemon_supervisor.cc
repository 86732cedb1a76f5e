#include "agent/daemon_supervisor.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <variant>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/time_util.h"
#include "spdlog/spdlog.h"

#include "agent/daemon_pid_record.h"
#include "agent/daemon_run.h"
#include "agent/http_probe.h"
#include "agent/pinning.h"
#include "common/cpu_list.h"
#include "common/file_util.h"
#include "common/status.h"

namespace crest::agent {
namespace {

using google::protobuf::util::TimeUtil;
using supervisor::kPollStep;
using supervisor::kReapWait;

// Why a start ends when its caller cancels it or a Stop aborts it.
constexpr char kStartCancelled[] = "start cancelled (the daemon was stopped)";

google::protobuf::Timestamp ToProto(absl::Time t) {
  return TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(t));
}

google::protobuf::Duration ToProto(absl::Duration d) {
  return TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(d));
}
// The overridable keys' values in `view`, as DaemonReady/DaemonStatus report them.
std::vector<crest::v1::ConfigOverride> EffectiveValues(const MindieConfigView& view,
                                                       const AgentConfig& config) {
  std::vector<crest::v1::ConfigOverride> out;
  for (const auto& [key, value] : view.schedule) {
    if (config.FindLimit(key) == nullptr) continue;
    crest::v1::ConfigOverride o;
    o.set_key(key);
    if (const auto* b = std::get_if<bool>(&value)) {
      o.set_bool_value(*b);
    } else if (const auto* i = std::get_if<int64_t>(&value)) {
      o.set_int_value(*i);
    } else if (const auto* d = std::get_if<double>(&value)) {
      o.set_double_value(*d);
    } else {
      continue;
    }
    out.push_back(o);
  }
  return out;
}

}  // namespace

DaemonSupervisor::DaemonSupervisor(AgentConfig config, std::string state_dir, const Clock* clock)
    : config_(std::move(config)),
      state_dir_(std::move(state_dir)),
      clock_(clock),
      config_json_(config_.config_json, state_dir_),
      // NOLINTNEXTLINE(concurrency-mt-unsafe): read once, before any thread of ours.
      hold_before_pid_record_(std::getenv("CREST_TESTING_HOLD_BEFORE_PID_RECORD") != nullptr),
      since_(clock->Now()) {}

DaemonSupervisor::~DaemonSupervisor() { Stop(std::nullopt); }

void DaemonSupervisor::SetStateListener(StateListener listener) {
  absl::MutexLock lock(&mu_);
  listener_ = std::move(listener);
}

crest::v1::DaemonEvent DaemonSupervisor::NewEvent() const {
  crest::v1::DaemonEvent e;
  *e.mutable_time() = ToProto(clock_->Now());
  return e;
}

void DaemonSupervisor::SetState(crest::v1::DaemonState state) {
  if (state_ != state) since_ = clock_->Now();
  state_ = state;
}

void DaemonSupervisor::Notify() {
  StateListener listener;
  {
    absl::MutexLock lock(&mu_);
    listener = listener_;
  }
  if (listener) listener(Status());
}

absl::Status DaemonSupervisor::WritePidRecord(pid_t pid) {
  return WriteDaemonPidRecord(pid_record_path(), pid, config_.binary);
}

void DaemonSupervisor::RemovePidRecord() {
  std::error_code ec;
  std::filesystem::remove(pid_record_path(), ec);
}

absl::Status DaemonSupervisor::RecoverAtStart() {
  if (std::filesystem::exists(pid_record_path())) {
    StopRecordedDaemon(pid_record_path());
    RemovePidRecord();
  }
  if (config_json_.HasBackup()) {
    spdlog::warn("restoring {} from the backup a previous agent left", config_json_.path());
    CREST_RETURN_IF_ERROR(config_json_.Restore());
  }
  return absl::OkStatus();
}
absl::Status DaemonSupervisor::Start(const StartParams& params, const EventSink& sink,
                                     const std::atomic<bool>* cancel) {
  if (!op_mu_.TryLock()) {
    return absl::FailedPreconditionError("another daemon start or stop is in progress");
  }
  struct Unlock {
    absl::Mutex* mu;
    ~Unlock() { mu->Unlock(); }
  } unlock{&op_mu_};
  abort_start_ = false;
  CREST_RETURN_IF_ERROR(StopPrevious(params.replace_running));

  absl::StatusOr<MindieConfig> config_json = WriteConfigJson(params);
  if (!config_json.ok()) return Annotate(config_json.status(), "writing config.json");
  const MindieConfigView& view = config_json->view();
  absl::Duration timeout = config_.start_timeout;
  if (params.start_timeout && *params.start_timeout < timeout) timeout = *params.start_timeout;

  const SpawnOptions options = DaemonSpawnOptions(params.cpus);
  std::shared_ptr<Run> run = SpawnDaemon(options, params, sink);
  if (run == nullptr) return absl::OkStatus();  // FAILED, sent to `sink`
  PublishStarting(run, view, sink);

  const StartWait wait{run, run->started + timeout, absl::FormatDuration(timeout), cancel};
  std::optional<StartFailure> failure = AwaitStartSuccess(wait, sink);
  if (!failure) failure = AwaitHealthReady(wait, view.ManagementUrl() + "/v2/health/ready");
  if (failure) {
    FailStart(run, *failure, sink);
    return absl::OkStatus();
  }
  ReadServingCache(wait, view);
  PublishReady(*run, view, sink);
  return absl::OkStatus();
}

absl::Status DaemonSupervisor::StopPrevious(bool replace_running) {
  std::shared_ptr<Run> previous;
  {
    absl::MutexLock lock(&mu_);
    previous = run_;
  }
  if (!previous) return absl::OkStatus();
  bool running = false;
  {
    absl::MutexLock lock(&mu_);
    running = !previous->done;
  }
  if (running && !replace_running) {
    return absl::FailedPreconditionError(absl::StrCat("a daemon is running (pid ", previous->pid,
                                                      "); stop it first or set replace_running"));
  }
  StopLocked(config_.stop_grace);
  return absl::OkStatus();
}

absl::StatusOr<MindieConfig> DaemonSupervisor::WriteConfigJson(const StartParams& params) {
  absl::StatusOr<MindieConfig> config_json =
      params.config_json ? absl::StatusOr<MindieConfig>(*params.config_json) : config_json_.Load();
  if (!config_json.ok()) return config_json.status();
  CREST_RETURN_IF_ERROR(config_json_.Write(*config_json));
  return config_json;
}

SpawnOptions DaemonSupervisor::DaemonSpawnOptions(const std::vector<uint32_t>& cpus) {
  SpawnOptions options;
  options.argv.push_back(config_.binary);
  options.argv.insert(options.argv.end(), config_.args.begin(), config_.args.end());
  options.cwd = config_.install_dir;
  options.cpus = cpus;
  // The real daemon logs to files unless told otherwise: the agent needs the
  // success line and the KV cache's (executor, k_caches) on its captured
  // stdout, at INFO (startup_log.h). MINDIE_LOG_* are the current names; the
  // MINDIE_LLM_PYTHON_LOG_* ones are deprecated aliases an older build may
  // need, set through the config's daemon env (docs/agent.md). It serves
  // /metrics only in monitor mode; the agent reads them in every run.
  options.env = {{"MIES_INSTALL_PATH", config_.install_dir},
                 {"MIES_CONFIG_JSON_PATH", config_.config_json},
                 {"MIES_SERVICE_MONITOR_MODE", "1"},
                 {"MINDIE_LOG_TO_STDOUT", "1"},
                 {"MINDIE_LOG_LEVEL", "INFO"}};
  for (const auto& [k, v] : config_.env) options.env[k] = v;
  // Recorded while the child waits before exec: an agent killed at any point
  // leaves either no daemon or a recorded one (which the kernel also kills).
  options.parent_death_signal = SIGKILL;
  options.before_exec = [this](pid_t pid) {
    if (hold_before_pid_record_) {
      spdlog::warn("testing: holding daemon pid {} before its pid record", pid);
      while (true) absl::SleepFor(absl::Hours(1));
    }
    return WritePidRecord(pid);
  };
  return options;
}

std::shared_ptr<DaemonSupervisor::Run> DaemonSupervisor::SpawnDaemon(const SpawnOptions& options,
                                                                     const StartParams& params,
                                                                     const EventSink& sink) {
  auto process = spawner_.Spawn(options);
  if (!process.ok()) {
    RemovePidRecord();  // written before an exec that then failed
    bool affinity = absl::StrContains(process.status().message(), "CPU affinity");
    FailBeforeSpawn({affinity ? crest::v1::DAEMON_FAILURE_PINNING : crest::v1::DAEMON_FAILURE_SPAWN,
                     std::string(process.status().message())},
                    sink);
    return nullptr;
  }
  auto run = std::make_shared<Run>();
  run->pid = (*process)->pid();
  run->process = std::move(*process);
  run->cpus = params.cpus;
  run->started = clock_->Now();
  run->stream_log = params.stream_log;
  if (!params.cpus.empty()) {
    absl::Status verified = VerifyAffinity(run->pid, params.cpus);
    if (!verified.ok()) {
      run->process.reset();  // kills and reaps
      RemovePidRecord();
      FailBeforeSpawn({crest::v1::DAEMON_FAILURE_PINNING, std::string(verified.message())}, sink);
      return nullptr;
    }
  }
  run->log =
      std::make_unique<RotatingLog>(config_.log_file, config_.log_max_bytes, config_.log_files);
  if (absl::Status s = run->log->Open(); !s.ok()) spdlog::warn("{}", std::string(s.message()));
  run->log->Append(
      absl::StrCat("=== crest-agent: started ", absl::StrJoin(options.argv, " "), " pid ", run->pid,
                   params.cpus.empty() ? "" : " cpus " + FormatCpuList(params.cpus), " ==="));
  spdlog::info("daemon started: pid {} ({}), pinned to {}", run->pid, config_.binary,
               params.cpus.empty() ? "nothing" : FormatCpuList(params.cpus));
  return run;
}

void DaemonSupervisor::PublishStarting(const std::shared_ptr<Run>& run,
                                       const MindieConfigView& view, const EventSink& sink) {
  {
    absl::MutexLock lock(&mu_);
    run_ = run;
    ++restarts_;
    last_failure_.reset();
    current_config_ = view;
    effective_ = EffectiveValues(view, config_);
    SetState(crest::v1::DAEMON_STARTING);
  }
  run->monitor = std::thread([this, run] { Monitor(run); });
  crest::v1::DaemonEvent e = NewEvent();
  e.mutable_starting()->set_pid(run->pid);
  for (uint32_t c : run->cpus) e.mutable_starting()->add_pinned_cpus(c);
  e.mutable_starting()->set_pinned_cpu_list(FormatCpuList(run->cpus));
  sink(e);
  Notify();
}

bool DaemonSupervisor::StartCancelled(const StartWait& wait) const {
  return (wait.cancel != nullptr && *wait.cancel) || abort_start_;
}

std::optional<DaemonSupervisor::StartFailure> DaemonSupervisor::AwaitStartSuccess(
    const StartWait& wait, const EventSink& sink) {
  Run& run = *wait.run;
  std::optional<absl::Time> oom_seen;  // when a fatal out-of-memory line was read
  while (true) {
    std::deque<std::string> lines;
    bool success = false;
    bool exited = false;
    std::optional<std::string> oom;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(
          absl::Condition(
              +[](Run* r) { return r->success_seen || r->done || !r->pending_lines.empty(); },
              &run),
          kPollStep);
      lines.swap(run.pending_lines);
      success = run.success_seen;
      exited = run.done;
      oom = run.startup.fatal_oom_line();
    }
    for (const std::string& line : lines) {
      crest::v1::DaemonEvent e = NewEvent();
      e.mutable_log_line()->set_line(line);
      sink(e);
    }
    if (StartCancelled(wait))
      return StartFailure{crest::v1::DAEMON_FAILURE_EXITED, kStartCancelled};
    if (exited) return ExitedBeforeSuccess(run);
    if (success) return std::nullopt;
    // Out of memory is a start that failed: the allocation error, then the
    // exit. A daemon that printed one and lingers is given a bounded while
    // to exit (a rank may still be tearing down), then killed as out of memory.
    if (oom && !oom_seen) oom_seen = clock_->Now();
    if (oom_seen && clock_->Now() >= *oom_seen + supervisor::kExitAfterOutOfMemory) {
      return StartFailure{
          crest::v1::DAEMON_FAILURE_OUT_OF_MEMORY,
          absl::StrCat("out of memory: ", *oom, " (the daemon had not exited ",
                       absl::FormatDuration(supervisor::kExitAfterOutOfMemory), " later)")};
    }
    if (clock_->Now() >= wait.deadline) {
      return StartFailure{crest::v1::DAEMON_FAILURE_TIMEOUT,
                          absl::StrCat("no \"Daemon start success!\" within ", wait.timeout_text)};
    }
  }
}

DaemonSupervisor::StartFailure DaemonSupervisor::ExitedBeforeSuccess(const Run& run) {
  StartFailureCause cause = StartFailureCause::kExited;
  std::string cause_line;
  std::string last_line;
  int code = -1;
  {
    absl::MutexLock lock(&mu_);
    cause = run.startup.ExitBeforeReadyCause();
    if (cause == StartFailureCause::kOutOfMemory) cause_line = *run.startup.fatal_oom_line();
    if (cause == StartFailureCause::kInvalidConfig) cause_line = *run.startup.config_error_line();
    if (!run.tail.empty()) last_line = run.tail.back();
    code = run.exit ? run.exit->code : -1;
  }
  if (cause == StartFailureCause::kOutOfMemory) {
    return {crest::v1::DAEMON_FAILURE_OUT_OF_MEMORY,
            absl::StrCat("out of memory: ", cause_line, " (the daemon exited, code ", code, ")")};
  }
  if (cause == StartFailureCause::kInvalidConfig) {
    return {crest::v1::DAEMON_FAILURE_INVALID_CONFIG,
            absl::StrCat("daemon exited (code ", code, ") with a config error: ", cause_line)};
  }
  return {crest::v1::DAEMON_FAILURE_EXITED,
          absl::StrCat("daemon exited before it was ready (code ", code, ")",
                       last_line.empty() ? "" : "; its last line: ", last_line)};
}

std::optional<DaemonSupervisor::StartFailure> DaemonSupervisor::AwaitHealthReady(
    const StartWait& wait, const std::string& ready_url) {
  Run& run = *wait.run;
  std::string last_answer;
  while (true) {
    auto code = HttpGetStatus(ready_url, absl::Seconds(1), config_.ca_file);
    if (code.ok() && *code == 200) return std::nullopt;
    last_answer = code.ok() ? absl::StrCat("HTTP ", *code) : std::string(code.status().message());
    bool exited = false;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](Run* r) { return r->done; }, &run),
                           kPollStep);
      exited = run.done;
    }
    if (StartCancelled(wait))
      return StartFailure{crest::v1::DAEMON_FAILURE_EXITED, kStartCancelled};
    if (exited) {
      return StartFailure{crest::v1::DAEMON_FAILURE_EXITED,
                          "daemon exited before its health endpoint was ready"};
    }
    if (clock_->Now() >= wait.deadline) {
      return StartFailure{crest::v1::DAEMON_FAILURE_TIMEOUT,
                          absl::StrCat(ready_url, " not ready within ", wait.timeout_text,
                                       " (last: ", last_answer, ")")};
    }
  }
}

void DaemonSupervisor::ReadServingCache(const StartWait& wait, const MindieConfigView& view) {
  Run& run = *wait.run;
  {
    absl::MutexLock lock(&mu_);
    run.startup.OnReady();
    if (run.startup.state() != BlockNumState::kNeedsFirstRequest) return;
  }
  // Current MindIE-LLM logs only its warm-up cache before READY and the
  // serving cache at its first forward pass: one short request makes it
  // print that line (startup_log.h).
  spdlog::info(
      "daemon pid {}: only a warm-up KV cache is in its log; one short request makes it "
      "log the serving cache",
      run.pid);
  const absl::Duration timeout =
      std::clamp(wait.deadline - clock_->Now(), absl::Seconds(1), supervisor::kFirstRequestTimeout);
  absl::StatusOr<std::string> answer =
      HttpPostJson(view.BusinessUrl() + "/generate", supervisor::kFirstRequest, timeout,
                   config_.ca_file, supervisor::kFirstRequestMaxBytes);
  absl::MutexLock lock(&mu_);
  if (answer.ok()) {
    // The daemon printed the line before it answered; the watch thread may
    // not have read it from the pipe yet.
    mu_.AwaitWithTimeout(
        absl::Condition(
            +[](Run* r) { return r->done || r->startup.state() == BlockNumState::kKnown; }, &run),
        supervisor::kFirstRequestLogWait);
  }
  run.startup.OnFirstRequestDone(answer.status());
}

void DaemonSupervisor::PublishReady(const Run& run, const MindieConfigView& view,
                                    const EventSink& sink) {
  crest::v1::DaemonEvent e = NewEvent();
  crest::v1::DaemonReady* ready = e.mutable_ready();
  {
    absl::MutexLock lock(&mu_);
    SetState(crest::v1::DAEMON_READY);
    ready->set_pid(run.pid);
    absl::StatusOr<NpuBlocks> blocks = run.startup.npu_blocks();
    if (blocks.ok()) {
      ready->set_npu_block_num(blocks->count);
      ready->set_npu_block_source(std::string(BlockSourceName(blocks->source)));
    } else {
      ready->set_npu_block_num_unknown(std::string(blocks.status().message()));
    }
    for (const crest::v1::ConfigOverride& o : effective_) *ready->add_effective() = o;
  }
  for (uint32_t c : run.cpus) ready->add_pinned_cpus(c);
  ready->set_pinned_cpu_list(FormatCpuList(run.cpus));
  *ready->mutable_startup_time() = ToProto(clock_->Now() - run.started);
  ready->set_business_url(view.BusinessUrl());
  ready->set_management_url(view.ManagementUrl());
  if (ready->npu_block_num() > 0) {
    spdlog::info("daemon ready: pid {}, npuBlockNum {} ({}), after {}", run.pid,
                 ready->npu_block_num(), ready->npu_block_source(),
                 absl::FormatDuration(clock_->Now() - run.started));
  } else {
    spdlog::warn("daemon ready: pid {}, npuBlockNum unknown: {}; after {}", run.pid,
                 ready->npu_block_num_unknown(), absl::FormatDuration(clock_->Now() - run.started));
  }
  sink(e);
  Notify();
}

void DaemonSupervisor::FailBeforeSpawn(const StartFailure& failure, const EventSink& sink) {
  crest::v1::DaemonEvent e = NewEvent();
  crest::v1::DaemonFailed* f = e.mutable_failed();
  f->set_kind(failure.kind);
  f->set_reason(failure.reason);
  f->set_exit_code(-1);
  {
    absl::MutexLock lock(&mu_);
    SetState(crest::v1::DAEMON_FAILED);
    last_failure_ = *f;
    effective_.clear();
  }
  ReportStartFailure(e, sink);
}

void DaemonSupervisor::FailStart(const std::shared_ptr<Run>& run, const StartFailure& failure,
                                 const EventSink& sink) {
  run->process->SignalGroup(SIGKILL).IgnoreError();
  {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](Run* r) { return r->done; }, run.get()),
                         kReapWait);
  }
  if (run->monitor.joinable()) run->monitor.join();
  crest::v1::DaemonEvent e = NewEvent();
  {
    absl::MutexLock lock(&mu_);
    *e.mutable_failed() = Fail(*run, failure.kind, failure.reason);
    effective_.clear();
    run_.reset();
  }
  RemovePidRecord();
  ReportStartFailure(e, sink);
}

void DaemonSupervisor::ReportStartFailure(const crest::v1::DaemonEvent& failed,
                                          const EventSink& sink) {
  absl::Status restored = config_json_.Restore();
  if (!restored.ok()) spdlog::error("restoring config.json: {}", std::string(restored.message()));
  spdlog::error("daemon start failed: {}", failed.failed().reason());
  sink(failed);
  Notify();
}

crest::v1::DaemonStatus DaemonSupervisor::Status() const {
  absl::MutexLock lock(&mu_);
  crest::v1::DaemonStatus s;
  s.set_state(state_);
  s.set_restarts(restarts_);
  *s.mutable_since() = ToProto(since_);
  s.set_log_file(config_.log_file);
  if (run_ && !run_->done) {
    s.set_pid(run_->pid);
    absl::StatusOr<NpuBlocks> blocks = run_->startup.npu_blocks();
    s.set_npu_block_num(blocks.ok() ? blocks->count : 0);
    s.set_pinned_cpu_list(FormatCpuList(run_->cpus));
    for (const crest::v1::ConfigOverride& o : effective_) *s.add_effective() = o;
  }
  if (last_failure_) *s.mutable_last_failure() = *last_failure_;
  return s;
}

std::optional<std::string> DaemonSupervisor::GoneSince(int32_t pid) const {
  absl::MutexLock lock(&mu_);
  if (!run_ || run_->pid != pid) {
    return absl::StrCat("the daemon (pid ", pid, ") was stopped or replaced");
  }
  if (run_->done) {
    return absl::StrCat("the daemon (pid ", pid, ") exited (code ",
                        run_->exit ? run_->exit->code : -1, ")");
  }
  if (run_->process) {
    pollfd exited{run_->process->pid_fd(), POLLIN, 0};
    if (::poll(&exited, 1, 0) > 0) return absl::StrCat("the daemon (pid ", pid, ") exited");
  }
  return std::nullopt;
}

absl::StatusOr<MindieConfigView> DaemonSupervisor::CurrentConfig() const {
  absl::MutexLock lock(&mu_);
  if (!current_config_) return absl::FailedPreconditionError("no daemon was started");
  return *current_config_;
}

std::vector<uint32_t> DaemonSupervisor::PinnedCpus() const {
  absl::MutexLock lock(&mu_);
  return run_ && !run_->done ? run_->cpus : std::vector<uint32_t>{};
}

}  // namespace crest::agent
