#include "agent/daemon_supervisor.h"

#include <poll.h>
#include <unistd.h>

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
#include "agent/http_probe.h"
#include "agent/pinning.h"
#include "common/cpu_list.h"
#include "common/file_util.h"
#include "common/status.h"

namespace crest::agent {
namespace {

using google::protobuf::util::TimeUtil;

constexpr size_t kTailLines = 60;
constexpr absl::Duration kPollStep = absl::Milliseconds(100);
constexpr absl::Duration kReapWait = absl::Seconds(30);

google::protobuf::Timestamp ToProto(absl::Time t) {
  return TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(t));
}

google::protobuf::Duration ToProto(absl::Duration d) {
  return TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(d));
}

bool IsOutOfMemory(const std::string& line) {
  std::string lower = absl::AsciiStrToLower(line);
  return absl::StrContains(lower, "out of memory") || absl::StrContains(lower, "outofmemory");
}

bool IsConfigError(const std::string& line) {
  std::string lower = absl::AsciiStrToLower(line);
  return absl::StrContains(lower, "invalid config") ||
         (absl::StrContains(lower, "error") && absl::StrContains(lower, "config"));
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

std::optional<int64_t> ParseKCacheBlocks(const std::string& line) {
  static constexpr std::string_view kMarker = "k_caches[0].shape=torch.Size([";
  size_t pos = line.find(kMarker);
  if (pos == std::string::npos) return std::nullopt;
  size_t start = pos + kMarker.size();
  size_t end = start;
  while (end < line.size() && absl::ascii_isdigit(static_cast<unsigned char>(line[end]))) ++end;
  int64_t n = 0;
  if (end == start || !absl::SimpleAtoi(absl::string_view(line).substr(start, end - start), &n)) {
    return std::nullopt;
  }
  // A cache of no blocks holds no request: not a size the range can follow from.
  if (n <= 0) return std::nullopt;
  return n;
}

struct DaemonSupervisor::Run {
  std::unique_ptr<Subprocess> process;
  pid_t pid = 0;
  std::vector<uint32_t> cpus;
  std::unique_ptr<RotatingLog> log;
  std::thread monitor;
  absl::Time started;
  bool stream_log = false;
  // Guarded by the supervisor's mu_.
  std::deque<std::string> tail;
  std::deque<std::string> pending_lines;
  bool success_seen = false;
  std::optional<int64_t> blocks;
  std::string oom_line;
  std::string config_error_line;
  std::optional<ExitInfo> exit;
  bool done = false;      // the monitor saw the exit and drained the output
  bool stopping = false;  // the agent asked it to stop
};

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

void DaemonSupervisor::OnLine(Run& run, const std::string& line) {
  run.log->Append(line);
  run.tail.push_back(line);
  if (run.tail.size() > kTailLines) run.tail.pop_front();
  if (run.stream_log) run.pending_lines.push_back(line);
  if (absl::StrContains(line, "Daemon start success!")) run.success_seen = true;
  if (auto blocks = ParseKCacheBlocks(line)) {
    // Several ranks may print the line: take the minimum.
    run.blocks = run.blocks ? std::min(*run.blocks, *blocks) : *blocks;
  }
  if (run.oom_line.empty() && IsOutOfMemory(line)) run.oom_line = line;
  if (run.config_error_line.empty() && IsConfigError(line)) run.config_error_line = line;
}

void DaemonSupervisor::Monitor(const std::shared_ptr<Run>& run) {
  std::string buffer;
  bool open = true;
  auto take_lines = [&](bool all) {
    absl::MutexLock lock(&mu_);
    size_t start = 0;
    for (size_t nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n', start)) {
      std::string line = buffer.substr(start, nl - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      OnLine(*run, line);
      start = nl + 1;
    }
    buffer.erase(0, start);
    if (all && !buffer.empty()) {
      OnLine(*run, buffer);
      buffer.clear();
    }
  };
  while (true) {
    pollfd fds[2] = {{run->process->output_fd(), POLLIN, 0}, {run->process->pid_fd(), POLLIN, 0}};
    int nfds = open ? 2 : 1;
    pollfd* first = open ? fds : &fds[1];
    ::poll(first, nfds, static_cast<int>(absl::ToInt64Milliseconds(kPollStep)));
    if (open) {
      open = run->process->ReadAvailable(&buffer);
      take_lines(false);
    }
    std::optional<ExitInfo> exit = run->process->WaitFor(absl::ZeroDuration());
    if (!exit) continue;
    // The leader is gone: nothing of its group may outlive it.
    ::kill(-run->pid, SIGKILL);
    while (open) {
      pollfd p{run->process->output_fd(), POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) break;
      open = run->process->ReadAvailable(&buffer);
    }
    take_lines(true);
    bool crashed = false;
    {
      absl::MutexLock lock(&mu_);
      run->exit = exit;
      run->done = true;
      run->log->Append(absl::StrCat("=== crest-agent: daemon pid ", run->pid, " exited with code ",
                                    exit->code, " ==="));
      if (run_ == run && state_ == crest::v1::DAEMON_READY && !run->stopping) {
        crest::v1::DaemonFailed f =
            Fail(*run, crest::v1::DAEMON_FAILURE_EXITED,
                 absl::StrCat("daemon exited after it was ready (code ", exit->code, ")"));
        f.set_exit_code(exit->code);
        last_failure_ = f;
        crashed = true;
      }
    }
    if (crashed) {
      spdlog::error("daemon pid {} exited while ready (code {})", run->pid, exit->code);
      RemovePidRecord();
      Notify();
    }
    return;
  }
}

crest::v1::DaemonFailed DaemonSupervisor::Fail(Run& run, crest::v1::DaemonFailure kind,
                                               const std::string& reason) {
  crest::v1::DaemonFailed f;
  f.set_kind(kind);
  f.set_reason(reason);
  for (const std::string& line : run.tail) f.add_log_tail(line);
  f.set_exit_code(run.exit ? run.exit->code : -1);
  SetState(crest::v1::DAEMON_FAILED);
  last_failure_ = f;
  return f;
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

  {
    std::shared_ptr<Run> previous;
    {
      absl::MutexLock lock(&mu_);
      previous = run_;
    }
    if (previous) {
      bool running = false;
      {
        absl::MutexLock lock(&mu_);
        running = !previous->done;
      }
      if (running && !params.replace_running) {
        return absl::FailedPreconditionError(absl::StrCat(
            "a daemon is running (pid ", previous->pid, "); stop it first or set replace_running"));
      }
      StopLocked(config_.stop_grace);
    }
  }

  // config.json: the original plus this start's overrides, and its view.
  absl::StatusOr<MindieConfig> config_json =
      params.config_json ? absl::StatusOr<MindieConfig>(*params.config_json) : config_json_.Load();
  absl::Status written = config_json.ok() ? config_json_.Write(*config_json) : config_json.status();
  if (!written.ok()) return Annotate(written, "writing config.json");
  const MindieConfigView& view = config_json->view();

  absl::Duration timeout = config_.start_timeout;
  if (params.start_timeout && *params.start_timeout < timeout) timeout = *params.start_timeout;

  SpawnOptions options;
  options.argv.push_back(config_.binary);
  options.argv.insert(options.argv.end(), config_.args.begin(), config_.args.end());
  options.cwd = config_.install_dir;
  options.cpus = params.cpus;
  // The real daemon logs to files unless told otherwise: the agent needs the
  // success and k_caches lines on its captured stdout (mindie-facts.md). It
  // serves /metrics only in monitor mode; the agent reads them in every run.
  options.env = {
      {"MIES_INSTALL_PATH", config_.install_dir}, {"MIES_CONFIG_JSON_PATH", config_.config_json},
      {"MIES_SERVICE_MONITOR_MODE", "1"},         {"MINDIE_LOG_TO_STDOUT", "1"},
      {"MINDIE_LLM_PYTHON_LOG_TO_STDOUT", "1"},   {"MINDIE_LLM_PYTHON_LOG_LEVEL", "INFO"}};
  for (const auto& [k, v] : config_.env) options.env[k] = v;

  auto fail_before_spawn = [&](crest::v1::DaemonFailure kind, const std::string& reason) {
    crest::v1::DaemonEvent e = NewEvent();
    crest::v1::DaemonFailed* f = e.mutable_failed();
    f->set_kind(kind);
    f->set_reason(reason);
    f->set_exit_code(-1);
    {
      absl::MutexLock lock(&mu_);
      SetState(crest::v1::DAEMON_FAILED);
      last_failure_ = *f;
      effective_.clear();
    }
    absl::Status restored = config_json_.Restore();
    if (!restored.ok()) spdlog::error("restoring config.json: {}", std::string(restored.message()));
    spdlog::error("daemon start failed: {}", reason);
    sink(e);
    Notify();
  };

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
  auto process = spawner_.Spawn(options);
  if (!process.ok()) {
    RemovePidRecord();  // written before an exec that then failed
    bool affinity = absl::StrContains(process.status().message(), "CPU affinity");
    fail_before_spawn(
        affinity ? crest::v1::DAEMON_FAILURE_PINNING : crest::v1::DAEMON_FAILURE_SPAWN,
        std::string(process.status().message()));
    return absl::OkStatus();
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
      fail_before_spawn(crest::v1::DAEMON_FAILURE_PINNING, std::string(verified.message()));
      return absl::OkStatus();
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
  {
    crest::v1::DaemonEvent e = NewEvent();
    e.mutable_starting()->set_pid(run->pid);
    for (uint32_t c : params.cpus) e.mutable_starting()->add_pinned_cpus(c);
    e.mutable_starting()->set_pinned_cpu_list(FormatCpuList(params.cpus));
    sink(e);
  }
  Notify();

  // Kills the daemon of a failed start and reports why.
  auto fail = [&](crest::v1::DaemonFailure kind, const std::string& reason) {
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
      *e.mutable_failed() = Fail(*run, kind, reason);
      effective_.clear();
      run_.reset();
    }
    RemovePidRecord();
    absl::Status restored = config_json_.Restore();
    if (!restored.ok()) spdlog::error("restoring config.json: {}", std::string(restored.message()));
    spdlog::error("daemon start failed: {}", reason);
    sink(e);
    Notify();
  };

  absl::Time deadline = run->started + timeout;
  std::string timeout_text = absl::FormatDuration(timeout);
  // Phase 1: the log says it loaded (or fails).
  while (true) {
    std::deque<std::string> lines;
    bool success = false;
    bool exited = false;
    std::string oom;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](Run* r) {
                                 return r->success_seen || r->done || !r->oom_line.empty() ||
                                        !r->pending_lines.empty();
                               },
                               run.get()),
                           kPollStep);
      lines.swap(run->pending_lines);
      success = run->success_seen;
      exited = run->done;
      oom = run->oom_line;
    }
    for (const std::string& line : lines) {
      crest::v1::DaemonEvent e = NewEvent();
      e.mutable_log_line()->set_line(line);
      sink(e);
    }
    if ((cancel != nullptr && *cancel) || abort_start_) {
      fail(crest::v1::DAEMON_FAILURE_EXITED, "start cancelled (the daemon was stopped)");
      return absl::OkStatus();
    }
    if (!oom.empty()) {
      fail(crest::v1::DAEMON_FAILURE_OUT_OF_MEMORY, absl::StrCat("out of memory: ", oom));
      return absl::OkStatus();
    }
    if (exited) {
      std::string config_error;
      int code = -1;
      {
        absl::MutexLock lock(&mu_);
        config_error = run->config_error_line;
        code = run->exit ? run->exit->code : -1;
      }
      if (!config_error.empty()) {
        fail(crest::v1::DAEMON_FAILURE_INVALID_CONFIG,
             absl::StrCat("daemon exited (code ", code, ") with a config error: ", config_error));
      } else {
        fail(crest::v1::DAEMON_FAILURE_EXITED,
             absl::StrCat("daemon exited before it was ready (code ", code, ")"));
      }
      return absl::OkStatus();
    }
    if (success) break;
    if (clock_->Now() >= deadline) {
      fail(crest::v1::DAEMON_FAILURE_TIMEOUT,
           absl::StrCat("no \"Daemon start success!\" within ", timeout_text));
      return absl::OkStatus();
    }
  }
  // Phase 2: the management port answers ready.
  std::string ready_url = view.ManagementUrl() + "/v2/health/ready";
  std::string last_answer;
  while (true) {
    auto code = HttpGetStatus(ready_url, absl::Seconds(1), config_.ca_file);
    if (code.ok() && *code == 200) break;
    last_answer = code.ok() ? absl::StrCat("HTTP ", *code) : std::string(code.status().message());
    bool exited = false;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](Run* r) { return r->done; }, run.get()),
                           kPollStep);
      exited = run->done;
    }
    if ((cancel != nullptr && *cancel) || abort_start_) {
      fail(crest::v1::DAEMON_FAILURE_EXITED, "start cancelled (the daemon was stopped)");
      return absl::OkStatus();
    }
    if (exited) {
      fail(crest::v1::DAEMON_FAILURE_EXITED, "daemon exited before its health endpoint was ready");
      return absl::OkStatus();
    }
    if (clock_->Now() >= deadline) {
      fail(crest::v1::DAEMON_FAILURE_TIMEOUT,
           absl::StrCat(ready_url, " not ready within ", timeout_text, " (last: ", last_answer,
                        ")"));
      return absl::OkStatus();
    }
  }
  crest::v1::DaemonEvent e = NewEvent();
  crest::v1::DaemonReady* ready = e.mutable_ready();
  {
    absl::MutexLock lock(&mu_);
    SetState(crest::v1::DAEMON_READY);
    ready->set_pid(run->pid);
    ready->set_npu_block_num(run->blocks.value_or(0));
    for (const crest::v1::ConfigOverride& o : effective_) *ready->add_effective() = o;
  }
  for (uint32_t c : params.cpus) ready->add_pinned_cpus(c);
  ready->set_pinned_cpu_list(FormatCpuList(params.cpus));
  *ready->mutable_startup_time() = ToProto(clock_->Now() - run->started);
  ready->set_business_url(view.BusinessUrl());
  ready->set_management_url(view.ManagementUrl());
  spdlog::info("daemon ready: pid {}, npuBlockNum {}, after {}", run->pid, ready->npu_block_num(),
               absl::FormatDuration(clock_->Now() - run->started));
  sink(e);
  Notify();
  return absl::OkStatus();
}

crest::v1::StopDaemonReply DaemonSupervisor::Stop(std::optional<absl::Duration> grace) {
  abort_start_ = true;
  absl::MutexLock op(&op_mu_);
  abort_start_ = false;
  crest::v1::StopDaemonReply reply = StopLocked(grace.value_or(config_.stop_grace));
  Notify();
  return reply;
}

crest::v1::StopDaemonReply DaemonSupervisor::StopLocked(absl::Duration grace) {
  crest::v1::StopDaemonReply reply;
  std::shared_ptr<Run> run;
  {
    absl::MutexLock lock(&mu_);
    run = run_;
    if (run && !run->done) {
      run->stopping = true;
      SetState(crest::v1::DAEMON_STOPPING);
    }
  }
  if (run) {
    bool was_running = false;
    {
      absl::MutexLock lock(&mu_);
      was_running = !run->done;
    }
    if (was_running) {
      spdlog::info("stopping daemon pid {} (SIGTERM, grace {})", run->pid,
                   absl::FormatDuration(grace));
      run->process->SignalGroup(SIGTERM).IgnoreError();
      bool done = false;
      {
        absl::MutexLock lock(&mu_);
        done = mu_.AwaitWithTimeout(absl::Condition(
                                        +[](Run* r) { return r->done; }, run.get()),
                                    grace);
      }
      if (!done) {
        spdlog::warn("daemon pid {} ignored SIGTERM for {}; SIGKILL to its group", run->pid,
                     absl::FormatDuration(grace));
        run->process->SignalGroup(SIGKILL).IgnoreError();
        reply.set_killed(true);
        absl::MutexLock lock(&mu_);
        mu_.AwaitWithTimeout(absl::Condition(
                                 +[](Run* r) { return r->done; }, run.get()),
                             kReapWait);
      }
    }
    if (run->monitor.joinable()) run->monitor.join();
    reply.set_was_running(was_running);
    {
      absl::MutexLock lock(&mu_);
      reply.set_exit_code(run->exit ? run->exit->code : -1);
      if (run_ == run) run_.reset();
      if (state_ != crest::v1::DAEMON_FAILED || was_running) SetState(crest::v1::DAEMON_STOPPED);
      effective_.clear();
    }
    RemovePidRecord();
  }
  absl::Status restored = config_json_.Restore();
  if (!restored.ok()) spdlog::error("restoring config.json: {}", std::string(restored.message()));
  return reply;
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
    s.set_npu_block_num(run_->blocks.value_or(0));
    s.set_pinned_cpu_list(FormatCpuList(run_->cpus));
    for (const crest::v1::ConfigOverride& o : effective_) *s.add_effective() = o;
  }
  if (last_failure_) *s.mutable_last_failure() = *last_failure_;
  return s;
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
